//! The config file: its default text, its errors, its place, and precedence.

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/home/u/.config/strata/config.toml"))
}

#[test]
fn the_default_text_sets_every_key_to_its_default() {
    let config = parse(Config::default_text()).expect("the default text parses");
    // Every setting is said in it, not left to the default.
    assert!(config.interval.is_some() && config.theme.is_some() && config.ascii.is_some());
    assert!(config.sort.is_some() && config.mouse.is_some() && config.columns.is_some());
    assert_eq!(
        Settings::resolve(&Overrides::default(), &config),
        Settings::default()
    );
    // And documented: every sort key and every filter part is named.
    let text = Config::default_text();
    for (name, _) in SORT_NAMES {
        assert!(text.contains(name), "sort {name}");
    }
    for part in ["user", "pid", "gpu", "command", "light", "dark"] {
        assert!(text.contains(part), "{part}");
    }
}

#[test]
fn the_default_text_documents_the_filter_and_parses_with_it_set() {
    let uncommented = Config::default_text()
        .replace("# user = ", "user = ")
        .replace("# pid = ", "pid = ")
        .replace("# gpu = ", "gpu = ")
        .replace("# command = ", "command = ");
    let config = parse(&uncommented).expect("the filter's examples parse");
    assert_eq!(
        config.filter,
        Filter {
            user: Some("alice".into()),
            pid: Some(4242),
            gpu: Some(0),
            command: Some("train.py".into()),
        }
    );
}

#[test]
fn an_empty_or_missing_file_is_every_default() {
    assert_eq!(parse("").expect("empty"), Config::default());
    let missing =
        std::env::temp_dir().join(format!("strata-no-config-{}.toml", std::process::id()));
    assert_eq!(
        Config::load(&missing).expect("missing is fine"),
        Config::default()
    );
}

#[test]
fn a_file_is_read_from_disk() {
    let path = std::env::temp_dir().join(format!("strata-config-{}.toml", std::process::id()));
    std::fs::write(&path, "theme = \"light\"\nascii = true\nsort = \"gpu\"\n").expect("write");
    let config = Config::load(&path);
    let _ = std::fs::remove_file(&path);
    let config = config.expect("loads");
    assert_eq!(config.theme, Some(Palette::Light));
    assert_eq!(config.ascii, Some(true));
    assert_eq!(config.sort, Some(SortKey::Device));
}

/// The error's one line, and its parts.
fn error(text: &str) -> (String, usize, Option<String>) {
    match parse(text) {
        Err(e @ ConfigError::Parse { .. }) => {
            let line = e.to_string();
            let ConfigError::Parse { line: at, key, .. } = e else {
                unreachable!()
            };
            (line, at, key)
        }
        other => panic!("{text:?} should not parse: {other:?}"),
    }
}

#[test]
fn an_unknown_key_names_the_file_the_line_and_the_key() {
    let (said, line, key) = error("interval = 2.0\n\nthem = \"light\"\n");
    assert_eq!((line, key.as_deref()), (3, Some("them")));
    assert!(
        said.starts_with("config file /home/u/.config/strata/config.toml, line 3, key `them`: "),
        "{said}"
    );
    assert!(said.contains("strata config --default"), "a hint: {said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    let (_, line, key) = error("[filter]\nusr = \"bob\"\n");
    assert_eq!((line, key.as_deref()), (2, Some("usr")));
}

#[test]
fn a_bad_value_names_its_key_and_what_it_takes() {
    for (text, line, key, says) in [
        ("theme = \"blue\"\n", 1, "theme", "dark"),
        ("ascii = true\ninterval = 0\n", 2, "interval", "0.05"),
        ("interval = \"fast\"\n", 1, "interval", ""),
        ("sort = \"size\"\n", 1, "sort", "host_memory"),
        ("mouse = 1\n", 1, "mouse", ""),
        ("[filter]\npid = -3\n", 2, "pid", ""),
    ] {
        let (said, at, named) = error(text);
        assert_eq!(
            (at, named.as_deref()),
            (line, Some(key)),
            "{text:?}: {said}"
        );
        assert!(said.contains(says), "{text:?}: {said}");
        assert_eq!(said.lines().count(), 1, "{said}");
    }
}

#[test]
fn a_hostile_key_is_made_safe_in_the_error() {
    let (said, _, _) = error("\"a\\u001b[2Jb\" = 1\n");
    assert!(!said.contains('\u{1b}'), "{said:?}");
}

#[test]
fn the_file_is_under_xdg_config_home_else_home() {
    let path = |xdg: Option<&str>, home: Option<&str>| {
        path_from(xdg.map(OsString::from), home.map(OsString::from))
    };
    assert_eq!(
        path(Some("/x/cfg"), Some("/home/u")),
        Some(PathBuf::from("/x/cfg/strata/config.toml"))
    );
    assert_eq!(
        path(None, Some("/home/u")),
        Some(PathBuf::from("/home/u/.config/strata/config.toml"))
    );
    // A relative XDG_CONFIG_HOME is ignored, as the XDG rule says.
    assert_eq!(
        path(Some("cfg"), Some("/home/u")),
        Some(PathBuf::from("/home/u/.config/strata/config.toml"))
    );
    assert_eq!(path(None, None), None);
}

#[test]
fn the_command_line_wins_over_the_file_which_wins_over_the_default() {
    let file =
        parse("interval = 5.0\ntheme = \"light\"\nmouse = false\n[filter]\nuser = \"bob\"\n")
            .expect("parses");
    let none = Settings::resolve(&Overrides::default(), &file);
    assert_eq!(none.interval, 5.0, "the file over the default");
    assert_eq!(none.theme, Palette::Light);
    assert!(!none.mouse);
    assert!(!none.ascii, "the default where neither says");
    assert_eq!(none.sort, SortKey::Used);
    assert_eq!(none.filter.user.as_deref(), Some("bob"));
    let cli = Overrides {
        interval: Some(0.5),
        theme: Some(Palette::Dark),
        ascii: Some(true),
        sort: Some(SortKey::Pid),
        mouse: None,
        filter: Some(Filter {
            gpu: Some(2),
            ..Filter::default()
        }),
    };
    let both = Settings::resolve(&cli, &file);
    assert_eq!(both.interval, 0.5);
    assert_eq!(both.theme, Palette::Dark);
    assert!(both.ascii);
    assert_eq!(both.sort, SortKey::Pid);
    assert!(
        !both.mouse,
        "the file's, where the command line says nothing"
    );
    assert_eq!(
        both.filter,
        Filter {
            gpu: Some(2),
            ..Filter::default()
        },
        "a filter on the command line replaces the file's whole"
    );
}

#[test]
fn columns_are_named_in_the_order_given_and_an_unknown_one_is_refused() {
    let config = parse("columns = [\"owner\", \"sm\"]").expect("parses");
    assert_eq!(config.columns, Some(vec![Column::Owner, Column::Sm]));
    let settings = Settings::resolve(&Overrides::default(), &config);
    assert_eq!(settings.columns, [Column::Owner, Column::Sm]);
    assert_eq!(parse("columns = []").expect("none").columns, Some(vec![]));
    let error = parse("columns = [\"sm\", \"gpu\"]").expect_err("no such column");
    let said = error.to_string();
    assert!(said.contains("columns"), "{said}");
    assert!(
        said.contains("host_memory") && said.contains("elapsed"),
        "{said}"
    );
}
