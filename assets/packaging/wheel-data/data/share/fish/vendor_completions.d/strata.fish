# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_strata_global_optspecs
    string join \n demo demo-speed= demo-at= demo-seed= nvml-lib= feed-dir= context-mib= interval= user= pid= gpu= no-mouse theme= ascii config= sites-on-climb h/help V/version
end

function __fish_strata_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_strata_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_strata_using_subcommand
    set -l cmd (__fish_strata_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c strata -n "__fish_strata_needs_command" -l demo-speed -d 'Demo only: story seconds per wall-clock second (10 plays its 20 minutes in 2)' -r
complete -c strata -n "__fish_strata_needs_command" -l demo-at -d 'Demo only: the story second to start at (the story so far is loaded as history)' -r
complete -c strata -n "__fish_strata_needs_command" -l demo-seed -d 'Demo only: the seed of the simulation\'s noise' -r
complete -c strata -n "__fish_strata_needs_command" -l nvml-lib -d 'The NVML library to load (default: the driver\'s libnvidia-ml.so.1)' -r -F
complete -c strata -n "__fish_strata_needs_command" -l feed-dir -d 'Look for allocator feeds only in this directory (and in the jobs\' own roots): by default /tmp/strata-<uid>, or every /tmp/strata-* as root' -r -F
complete -c strata -n "__fish_strata_needs_command" -l context-mib -d 'Use this CUDA context size (MiB) for every fed process instead of estimating it' -r
complete -c strata -n "__fish_strata_needs_command" -l interval -d 'Seconds between samples [default: 1, or the config file\'s `interval` for the monitor]' -r
complete -c strata -n "__fish_strata_needs_command" -l user -d 'Start with the process table showing this user\'s processes (as `/` user:NAME)' -r
complete -c strata -n "__fish_strata_needs_command" -l pid -d 'Start with the process table showing this process (as `/` pid:PID)' -r
complete -c strata -n "__fish_strata_needs_command" -l gpu -d 'Start with the process table showing the processes on this GPU: its index, or a prefix of its UUID (as `/` gpu:N)' -r
complete -c strata -n "__fish_strata_needs_command" -l theme -d 'Colours for a dark terminal background (the default) or a light one' -r -f -a "dark\t'Colours readable on a dark background'
light\t'Colours readable on a light background'"
complete -c strata -n "__fish_strata_needs_command" -l config -d 'The config file to read instead of $XDG_CONFIG_HOME/strata/config.toml (`strata config --default` prints one with every key)' -r -F
complete -c strata -n "__fish_strata_needs_command" -l demo -d 'Watch the built-in simulated training node instead of this machine\'s GPUs'
complete -c strata -n "__fish_strata_needs_command" -l no-mouse -d 'Leave the mouse to the terminal (its own text selection) instead of clicks and the wheel in strata'
complete -c strata -n "__fish_strata_needs_command" -l ascii -d 'Draw with ASCII only: no block, braille or box-drawing glyphs, for poor terminals and fonts'
complete -c strata -n "__fish_strata_needs_command" -l sites-on-climb -d 'When a climb of live tensors is first raised on a fed torch job, ask its agent for a sites window on its own (as `w` does), once per climb: which lines grew'
complete -c strata -n "__fish_strata_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c strata -n "__fish_strata_needs_command" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_needs_command" -f -a "snapshot" -d 'Print one sample of the node: every layer and finding'
complete -c strata -n "__fish_strata_needs_command" -f -a "run" -d 'Run CMD with the allocator feed in every Python process it starts (no code change)'
complete -c strata -n "__fish_strata_needs_command" -f -a "attach" -d 'Start the allocator feed in a running Python 3.14+ process (sys.remote_exec)'
complete -c strata -n "__fish_strata_needs_command" -f -a "sites" -d 'Which lines of a fed PyTorch job\'s code hold its GPU memory: its agent records the allocator\'s history for --seconds (torch 2.1+, Python stacks only, put back as the job had it), then prints the sites of live blocks and of what grew over the window'
complete -c strata -n "__fish_strata_needs_command" -f -a "analyze" -d 'Judge a recording as the monitor would have: findings with when each was first raised and last seen. Or read a PyTorch memory snapshot (`_dump_snapshot`): its segment map, the code that holds the memory, its OOMs'
complete -c strata -n "__fish_strata_needs_command" -f -a "serve" -d 'Serve the layers and findings as Prometheus metrics at http://ADDR/metrics, sampling every --interval on its own (a scrape never waits on NVML)'
complete -c strata -n "__fish_strata_needs_command" -f -a "fleet" -d 'Every node\'s devices, layers and findings in one view, from Prometheus (which scrapes `strata serve` on each node) or, for a few nodes, from their endpoints directly; a job\'s ranks across nodes with the ones that stand apart (`rank_outlier`)'
complete -c strata -n "__fish_strata_needs_command" -f -a "record" -d 'Append raw samples to FILE, one per interval, until stopped (TERM, HUP, INT) or --duration: recording format 2 (zstd) unless the name says JSON lines (.jsonl plain, .jsonl.zst, .gz gzip); with --ring, a flight record in the directory FILE; with --from, re-encode a recording into FILE'
complete -c strata -n "__fish_strata_needs_command" -f -a "export" -d 'Write a recording\'s tables for a notebook into the directory OUT: devices (each device\'s layers at each sample), processes (each process\'s figures, long form) and findings, as Parquet or CSV files that pandas, polars and DuckDB read as they are'
complete -c strata -n "__fish_strata_needs_command" -f -a "replay" -d 'The monitor, driven by a recording (format 2 or JSON lines, plain or compressed): p pause, + - speed, ← → a minute back or on, g G start and end'
complete -c strata -n "__fish_strata_needs_command" -f -a "doctor" -d 'What strata can and cannot see on this node, and why: each check ok, limited or missing, with the fix (exit status 0 when all is ok, 3 when some is limited, 1 when any is missing)'
complete -c strata -n "__fish_strata_needs_command" -f -a "completions" -d 'Print the completion script for SHELL: `strata completions bash > ~/.local/share/bash-completion/completions/strata`'
complete -c strata -n "__fish_strata_needs_command" -f -a "man" -d 'Print strata\'s man page (roff), or write one page per command into --dir: `strata man | man -l -`'
complete -c strata -n "__fish_strata_needs_command" -f -a "config" -d 'Say which config file the monitor reads and whether it is there, or print one with every key, documented (--default): `strata config --default > ~/.config/strata/config.toml`'
complete -c strata -n "__fish_strata_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l count -d 'Take this many samples, one interval apart' -r
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l group-by -d 'With --json: add `groups`, the processes summed per device by their launcher, pod (or container), Slurm job or user' -r
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l demo-speed -d 'Demo only: story seconds per wall-clock second (10 plays its 20 minutes in 2)' -r
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l demo-at -d 'Demo only: the story second to start at (the story so far is loaded as history)' -r
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l demo-seed -d 'Demo only: the seed of the simulation\'s noise' -r
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l nvml-lib -d 'The NVML library to load (default: the driver\'s libnvidia-ml.so.1)' -r -F
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l feed-dir -d 'Look for allocator feeds only in this directory (and in the jobs\' own roots): by default /tmp/strata-<uid>, or every /tmp/strata-* as root' -r -F
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l context-mib -d 'Use this CUDA context size (MiB) for every fed process instead of estimating it' -r
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l interval -d 'Seconds between samples [default: 1, or the config file\'s `interval` for the monitor]' -r
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l json -d 'Print JSON (schema strata.snapshot/1), one object per line'
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l report -d 'Print a Markdown report of the instant, for an issue tracker or an incident: GPUs, driver and CUDA versions, each process\'s allocator figures and peaks, the last OOM, the findings with their evidence'
complete -c strata -n "__fish_strata_using_subcommand snapshot" -l demo -d 'Watch the built-in simulated training node instead of this machine\'s GPUs'
complete -c strata -n "__fish_strata_using_subcommand snapshot" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand snapshot" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand run" -l feed-interval -d 'Seconds between the agent\'s samples of the allocator' -r
complete -c strata -n "__fish_strata_using_subcommand run" -l feed-dir -d 'Look for allocator feeds only in this directory (and in the jobs\' own roots): by default /tmp/strata-<uid>, or every /tmp/strata-* as root' -r -F
complete -c strata -n "__fish_strata_using_subcommand run" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand run" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand attach" -l feed-interval -d 'Seconds between the agent\'s samples of the allocator' -r
complete -c strata -n "__fish_strata_using_subcommand attach" -l wait -d 'Seconds to wait for the agent to report that it started' -r
complete -c strata -n "__fish_strata_using_subcommand attach" -l feed-dir -d 'Look for allocator feeds only in this directory (and in the jobs\' own roots): by default /tmp/strata-<uid>, or every /tmp/strata-* as root' -r -F
complete -c strata -n "__fish_strata_using_subcommand attach" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand attach" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand sites" -l seconds -d 'How long to record, in seconds (1 to 600)' -r
complete -c strata -n "__fish_strata_using_subcommand sites" -l top -d 'Sites listed per device, live and grown (1 to 50)' -r
complete -c strata -n "__fish_strata_using_subcommand sites" -l feed-dir -d 'Look for allocator feeds only in this directory (and in the jobs\' own roots): by default /tmp/strata-<uid>, or every /tmp/strata-* as root' -r -F
complete -c strata -n "__fish_strata_using_subcommand sites" -l json -d 'Print the summary as one JSON object (the agent\'s `sites` message)'
complete -c strata -n "__fish_strata_using_subcommand sites" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand sites" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand analyze" -l report-at -d 'Write the incident report of this instant (unix seconds, or RFC 3339: 2026-01-01T09:15:00Z) into the current directory, as `R` would have live, with its chart beside it' -r
complete -c strata -n "__fish_strata_using_subcommand analyze" -l context-mib -d 'Use this CUDA context size (MiB) for every fed process instead of estimating it' -r
complete -c strata -n "__fish_strata_using_subcommand analyze" -l json -d 'Print JSON: {"findings": [...]} with each finding\'s evidence; for a PyTorch snapshot, `strata.torch_snapshot/1` (its segment map, sites, OOMs and findings)'
complete -c strata -n "__fish_strata_using_subcommand analyze" -l every-sample -d 'Run every detector at every sample, as the monitor does. By default the ones that read the history (climbs, fragmentation, retries, OOMs, capacity) run every 10 s of recording time and at a process\'s last sample, a finding\'s since at most 10 s later: several times faster on a long recording'
complete -c strata -n "__fish_strata_using_subcommand analyze" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand analyze" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand serve" -l listen -d 'Listen on this HOST:PORT (a host name is resolved); 0.0.0.0:9842 for every interface' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l max-processes -d 'Export at most this many processes one by one (the largest by used memory); the rest are summed per device as pid="other"' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l record -d 'Keep a flight record of the samples served in the directory DIR (with --ring)' -r -F
complete -c strata -n "__fish_strata_using_subcommand serve" -l ring -d 'Keep the last DURATION (6h) on disk as a flight record: finished segments in the directory, the oldest deleted; segments around an OOM, a zombie context or a critical forecast are kept past it' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l ring-size -d 'With --ring: the most the ring\'s segments may take on disk (older ones go first)' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l evidence-size -d 'With --ring: the most the segments kept as evidence may take (the oldest go first)' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l demo-speed -d 'Demo only: story seconds per wall-clock second (10 plays its 20 minutes in 2)' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l demo-at -d 'Demo only: the story second to start at (the story so far is loaded as history)' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l demo-seed -d 'Demo only: the seed of the simulation\'s noise' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l nvml-lib -d 'The NVML library to load (default: the driver\'s libnvidia-ml.so.1)' -r -F
complete -c strata -n "__fish_strata_using_subcommand serve" -l feed-dir -d 'Look for allocator feeds only in this directory (and in the jobs\' own roots): by default /tmp/strata-<uid>, or every /tmp/strata-* as root' -r -F
complete -c strata -n "__fish_strata_using_subcommand serve" -l context-mib -d 'Use this CUDA context size (MiB) for every fed process instead of estimating it' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l interval -d 'Seconds between samples [default: 1, or the config file\'s `interval` for the monitor]' -r
complete -c strata -n "__fish_strata_using_subcommand serve" -l demo -d 'Watch the built-in simulated training node instead of this machine\'s GPUs'
complete -c strata -n "__fish_strata_using_subcommand serve" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand serve" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand fleet" -l prometheus -d 'Prometheus\'s base URL (http:// or https://): it scrapes `strata serve` on every node. Credentials from --basic-auth-file or --bearer-token-file, or the environment (STRATA_PROMETHEUS_BASIC_AUTH=user:password, STRATA_PROMETHEUS_TOKEN), never here' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l endpoints -d 'Read these `strata serve` endpoints directly (HOST:PORT,...), for a few nodes; past a few dozen, Prometheus is the way' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l endpoints-file -d 'Read the endpoints listed in FILE (one a line; `#` starts a comment)' -r -F
complete -c strata -n "__fish_strata_using_subcommand fleet" -l refresh -d 'Seconds between refreshes of the view' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l scrape-interval -d 'How often Prometheus scrapes the nodes (or, with --endpoints, --refresh): a node whose sample is older than three of these is shown stale' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l timeout -d 'Seconds one request may take, connect to last byte' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l concurrency -d 'Endpoints read at once (--endpoints)' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l ca -d 'Trust the CA certificates in this PEM file instead of the system\'s' -r -F
complete -c strata -n "__fish_strata_using_subcommand fleet" -l basic-auth-file -d 'A file with one line, user:password, for Prometheus\'s basic auth' -r -F
complete -c strata -n "__fish_strata_using_subcommand fleet" -l bearer-token-file -d 'A file with the bearer token for Prometheus' -r -F
complete -c strata -n "__fish_strata_using_subcommand fleet" -l ssh-command -d 'The command that opens a node\'s live view, `{node}` replaced by its name' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l rows -d 'From Prometheus, read N device rows and N jobs a refresh, the first by the order and filter shown, picked by Prometheus (topk); the screen reads N more as the cursor nears the last [default: 200; with --json, every row]' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l sort -d 'The device rows\' order at the start (`s` changes it on the screen)' -r -f -a "urgency\t'Critical findings, then the soonest OOM, climbs, fragmentation, the fullest'
node\t'By node name, then GPU'
used\t'The fullest first'"
complete -c strata -n "__fish_strata_using_subcommand fleet" -l filter -d 'Only rows whose node, device, finding or process owner (job, pod, namespace, user) contains TEXT, in any case; jobs whose key does (`/` on the screen)' -r
complete -c strata -n "__fish_strata_using_subcommand fleet" -l json -d 'Print the fleet once as JSON (schema strata.fleet/1) and exit'
complete -c strata -n "__fish_strata_using_subcommand fleet" -l reversed -d 'The least urgent, last node or emptiest first (`S` on the screen)'
complete -c strata -n "__fish_strata_using_subcommand fleet" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c strata -n "__fish_strata_using_subcommand fleet" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand record" -l duration -d 'Stop after this long: 90s, 30m, 24h, or seconds' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l max-size -d 'Rotate FILE past this size (500M, 2G): FILE becomes FILE.1, FILE.1 FILE.2, ...' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l keep -d 'With --max-size: how many rotated files to keep (FILE.1 to FILE.N)' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l from -d 'Re-encode the recording IN (format 2 or JSON lines, plain or compressed, or `snapshot --json --count` output) into FILE, in the format FILE\'s name asks for, then stop. A recording with no sample is an error, and FILE is left as it was' -r -F
complete -c strata -n "__fish_strata_using_subcommand record" -l ring -d 'Keep the last DURATION (6h) on disk as a flight record: finished segments in the directory, the oldest deleted; segments around an OOM, a zombie context or a critical forecast are kept past it' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l ring-size -d 'With --ring: the most the ring\'s segments may take on disk (older ones go first)' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l evidence-size -d 'With --ring: the most the segments kept as evidence may take (the oldest go first)' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l demo-speed -d 'Demo only: story seconds per wall-clock second (10 plays its 20 minutes in 2)' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l demo-at -d 'Demo only: the story second to start at (the story so far is loaded as history)' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l demo-seed -d 'Demo only: the seed of the simulation\'s noise' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l nvml-lib -d 'The NVML library to load (default: the driver\'s libnvidia-ml.so.1)' -r -F
complete -c strata -n "__fish_strata_using_subcommand record" -l feed-dir -d 'Look for allocator feeds only in this directory (and in the jobs\' own roots): by default /tmp/strata-<uid>, or every /tmp/strata-* as root' -r -F
complete -c strata -n "__fish_strata_using_subcommand record" -l context-mib -d 'Use this CUDA context size (MiB) for every fed process instead of estimating it' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l interval -d 'Seconds between samples [default: 1, or the config file\'s `interval` for the monitor]' -r
complete -c strata -n "__fish_strata_using_subcommand record" -l demo -d 'Watch the built-in simulated training node instead of this machine\'s GPUs'
complete -c strata -n "__fish_strata_using_subcommand record" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand record" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand export" -l to -d 'The tables\' format' -r -f -a "parquet\t'Apache Parquet (zstd), with each column\'s meaning in the file\'s key-value metadata'
csv\t'CSV with a header row: the column names carry the units'"
complete -c strata -n "__fish_strata_using_subcommand export" -l context-mib -d 'Use this CUDA context size (MiB) for every fed process instead of estimating it' -r
complete -c strata -n "__fish_strata_using_subcommand export" -l force -d 'Write into OUT even though it holds files: the three tables of this format are replaced, each once it is written whole; nothing else in OUT is touched'
complete -c strata -n "__fish_strata_using_subcommand export" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c strata -n "__fish_strata_using_subcommand export" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand replay" -l context-mib -d 'Use this CUDA context size (MiB) for every fed process instead of estimating it' -r
complete -c strata -n "__fish_strata_using_subcommand replay" -l interval -d 'Seconds between samples [default: 1, or the config file\'s `interval` for the monitor]' -r
complete -c strata -n "__fish_strata_using_subcommand replay" -l user -d 'Start with the process table showing this user\'s processes (as `/` user:NAME)' -r
complete -c strata -n "__fish_strata_using_subcommand replay" -l pid -d 'Start with the process table showing this process (as `/` pid:PID)' -r
complete -c strata -n "__fish_strata_using_subcommand replay" -l gpu -d 'Start with the process table showing the processes on this GPU: its index, or a prefix of its UUID (as `/` gpu:N)' -r
complete -c strata -n "__fish_strata_using_subcommand replay" -l theme -d 'Colours for a dark terminal background (the default) or a light one' -r -f -a "dark\t'Colours readable on a dark background'
light\t'Colours readable on a light background'"
complete -c strata -n "__fish_strata_using_subcommand replay" -l config -d 'The config file to read instead of $XDG_CONFIG_HOME/strata/config.toml (`strata config --default` prints one with every key)' -r -F
complete -c strata -n "__fish_strata_using_subcommand replay" -l no-mouse -d 'Leave the mouse to the terminal (its own text selection) instead of clicks and the wheel in strata'
complete -c strata -n "__fish_strata_using_subcommand replay" -l ascii -d 'Draw with ASCII only: no block, braille or box-drawing glyphs, for poor terminals and fonts'
complete -c strata -n "__fish_strata_using_subcommand replay" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c strata -n "__fish_strata_using_subcommand replay" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand doctor" -l listen -d 'The address `strata serve` would listen on, whose port is checked' -r
complete -c strata -n "__fish_strata_using_subcommand doctor" -l timeout -d 'Seconds one check may take (a call into a hung driver never returns): past it, the check says it timed out and the rest go on' -r
complete -c strata -n "__fish_strata_using_subcommand doctor" -l nvml-lib -d 'The NVML library to load (default: the driver\'s libnvidia-ml.so.1)' -r -F
complete -c strata -n "__fish_strata_using_subcommand doctor" -l feed-dir -d 'Look for allocator feeds only in this directory (and in the jobs\' own roots): by default /tmp/strata-<uid>, or every /tmp/strata-* as root' -r -F
complete -c strata -n "__fish_strata_using_subcommand doctor" -l json -d 'Print JSON (schema strata.doctor/1): every check with its status, reason and fix'
complete -c strata -n "__fish_strata_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand doctor" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand completions" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand completions" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand man" -l dir -d 'Write strata.1 and strata-COMMAND.1 for each command into DIR instead' -r -F
complete -c strata -n "__fish_strata_using_subcommand man" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand man" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand config" -l default -d 'Print the default config file, every key with its meaning and its default'
complete -c strata -n "__fish_strata_using_subcommand config" -s h -l help -d 'Print help'
complete -c strata -n "__fish_strata_using_subcommand config" -s V -l version -d 'Print version'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "snapshot" -d 'Print one sample of the node: every layer and finding'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "run" -d 'Run CMD with the allocator feed in every Python process it starts (no code change)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "attach" -d 'Start the allocator feed in a running Python 3.14+ process (sys.remote_exec)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "sites" -d 'Which lines of a fed PyTorch job\'s code hold its GPU memory: its agent records the allocator\'s history for --seconds (torch 2.1+, Python stacks only, put back as the job had it), then prints the sites of live blocks and of what grew over the window'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "analyze" -d 'Judge a recording as the monitor would have: findings with when each was first raised and last seen. Or read a PyTorch memory snapshot (`_dump_snapshot`): its segment map, the code that holds the memory, its OOMs'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "serve" -d 'Serve the layers and findings as Prometheus metrics at http://ADDR/metrics, sampling every --interval on its own (a scrape never waits on NVML)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "fleet" -d 'Every node\'s devices, layers and findings in one view, from Prometheus (which scrapes `strata serve` on each node) or, for a few nodes, from their endpoints directly; a job\'s ranks across nodes with the ones that stand apart (`rank_outlier`)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "record" -d 'Append raw samples to FILE, one per interval, until stopped (TERM, HUP, INT) or --duration: recording format 2 (zstd) unless the name says JSON lines (.jsonl plain, .jsonl.zst, .gz gzip); with --ring, a flight record in the directory FILE; with --from, re-encode a recording into FILE'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "export" -d 'Write a recording\'s tables for a notebook into the directory OUT: devices (each device\'s layers at each sample), processes (each process\'s figures, long form) and findings, as Parquet or CSV files that pandas, polars and DuckDB read as they are'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "replay" -d 'The monitor, driven by a recording (format 2 or JSON lines, plain or compressed): p pause, + - speed, ← → a minute back or on, g G start and end'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "doctor" -d 'What strata can and cannot see on this node, and why: each check ok, limited or missing, with the fix (exit status 0 when all is ok, 3 when some is limited, 1 when any is missing)'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "completions" -d 'Print the completion script for SHELL: `strata completions bash > ~/.local/share/bash-completion/completions/strata`'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "man" -d 'Print strata\'s man page (roff), or write one page per command into --dir: `strata man | man -l -`'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "config" -d 'Say which config file the monitor reads and whether it is there, or print one with every key, documented (--default): `strata config --default > ~/.config/strata/config.toml`'
complete -c strata -n "__fish_strata_using_subcommand help; and not __fish_seen_subcommand_from snapshot run attach sites analyze serve fleet record export replay doctor completions man config help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
