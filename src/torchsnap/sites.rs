//! The site of a block or trace entry (spec: "The site of a block or trace entry", the same
//! rule as the agent's): the innermost frame in the job's own code, `FILE:LINE in FUNCTION`,
//! and up to two job frames outward as `via`. torch writes frames innermost first
//! (`_memory_viz._write_blocks` reverses them to draw a flame graph root first).

use super::shape::{Frame, StackId, Stacks};
use crate::sample::pool::MAX_SITE_CHARS;
use std::rc::Rc;

/// A function name is cut at this many characters.
const MAX_FUNCTION_CHARS: usize = 128;
/// Job frames after the site kept as `via`.
const VIA: usize = 2;
/// The site of a stack with no frame in the job's code.
pub(crate) const NO_JOB_FRAME: &str = "(no frame in the job's code)";

/// Whether a path component names a Python standard library directory: `python3.N`.
fn python_dir(component: &str) -> bool {
    component
        .strip_prefix("python3.")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a frame is in the job's own code (not the interpreter's, not C/C++, not torch's
/// package, not strata's agent, not the standard library).
pub(crate) fn job_frame(file: &str) -> bool {
    if file.is_empty() || file == "??" || file.starts_with('<') {
        return false;
    }
    if [".cpp", ".cc", ".h", ".cu", ".c"]
        .iter()
        .any(|ext| file.ends_with(ext))
    {
        return false;
    }
    let parts: Vec<&str> = file.split('/').collect();
    let packages = |p: &str| p == "site-packages" || p == "dist-packages";
    if parts.windows(2).any(|w| packages(w[0]) && w[1] == "torch") {
        return false;
    }
    if parts.contains(&"strata_feed") {
        return false;
    }
    // The standard library: under `lib/python3.N/` (or `lib64/`, as some distributions lay
    // it), not inside a site-packages or dist-packages directory.
    let stdlib = parts
        .windows(2)
        .position(|w| (w[0] == "lib" || w[0] == "lib64") && python_dir(w[1]));
    if let Some(at) = stdlib {
        if !parts[at + 2..].iter().any(|p| packages(p)) {
            return false;
        }
    }
    true
}

/// `FILE:LINE in FUNCTION`, FILE's start cut past [`MAX_SITE_CHARS`] characters, FUNCTION
/// cut at [`MAX_FUNCTION_CHARS`].
pub(crate) fn site_text(frame: &Frame) -> String {
    let chars = frame.file.chars().count();
    let file = if chars > MAX_SITE_CHARS {
        let keep = MAX_SITE_CHARS - 3;
        let tail: String = frame.file.chars().skip(chars - keep).collect();
        format!("...{tail}")
    } else {
        frame.file.to_string()
    };
    let function: String = frame.name.chars().take(MAX_FUNCTION_CHARS).collect();
    format!("{file}:{} in {function}", frame.line)
}

/// A stack's site and `via`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Site {
    pub(crate) site: String,
    pub(crate) via: Vec<String>,
}

/// The site of a stack of frames, innermost first, `own` telling the job's frames.
fn site_with<'a>(
    frames: impl IntoIterator<Item = &'a Frame>,
    mut own: impl FnMut(&Frame) -> bool,
) -> Site {
    let mut mine = frames.into_iter().filter(|f| own(f));
    match mine.next() {
        Some(first) => Site {
            site: site_text(first),
            via: mine.take(VIA).map(site_text).collect(),
        },
        None => Site {
            site: NO_JOB_FRAME.into(),
            via: Vec::new(),
        },
    }
}

/// The site of a stack of frames, innermost first.
pub(crate) fn site_of<'a>(frames: impl IntoIterator<Item = &'a Frame>) -> Site {
    site_with(frames, |f| job_frame(&f.file))
}

/// Each stack's site, worked out once; each file judged once (frames share their file's
/// text, so its place names it).
pub(crate) struct SiteTable {
    sites: Vec<Option<Rc<Site>>>,
    own: hashbrown::HashMap<*const u8, bool>,
}

impl SiteTable {
    pub(crate) fn new(stacks: &Stacks) -> Self {
        SiteTable {
            sites: vec![None; stacks.len()],
            own: hashbrown::HashMap::new(),
        }
    }

    pub(crate) fn get(&mut self, stacks: &Stacks, id: StackId) -> Rc<Site> {
        if let Some(Some(site)) = self.sites.get(id as usize) {
            return site.clone();
        }
        let own = &mut self.own;
        let site = Rc::new(site_with(stacks.get(id), |f| {
            *own.entry(f.file.as_ptr())
                .or_insert_with(|| job_frame(&f.file))
        }));
        if let Some(slot) = self.sites.get_mut(id as usize) {
            *slot = Some(site.clone());
        }
        site
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(file: &str, line: i64, name: &str) -> Frame {
        Frame {
            file: Rc::from(file),
            line,
            name: Rc::from(name),
        }
    }

    #[test]
    fn the_jobs_own_frames_are_told_from_torch_the_interpreter_and_the_stdlib() {
        for not_own in [
            "",
            "??",
            "<frozen importlib._bootstrap>",
            "<string>",
            "/pytorch/c10/cuda/CUDACachingAllocator.cpp",
            "aten/src/ATen/native/cuda/Loops.cuh.cu",
            "/usr/include/c++/12/bits/shared_ptr.h",
            "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py",
            "/usr/lib/python3/dist-packages/torch/functional.py",
            "/opt/strata/assets/python/strata_feed/_torch.py",
            "/usr/lib/python3.11/threading.py",
            "/usr/lib64/python3.12/runpy.py",
        ] {
            assert!(!job_frame(not_own), "{not_own} is not the job's");
        }
        for own in [
            "/home/me/train.py",
            "train.py",
            "/venv/lib/python3.11/site-packages/transformers/modeling_utils.py",
            // `torch` not directly under site-packages: the job's (a checkout of its own).
            "/home/me/src/torch/model.py",
            "/venv/lib/python3.11/site-packages/mylib/torch/ops.py",
            "/usr/lib/python3.11/site-packages/mymodel/layer.py",
        ] {
            assert!(job_frame(own), "{own} is the job's");
        }
    }

    #[test]
    fn the_site_is_the_innermost_job_frame_with_two_callers() {
        let frames = [
            frame(
                "/venv/lib/python3.11/site-packages/torch/nn/functional.py",
                10,
                "linear",
            ),
            frame("/home/me/model.py", 42, "forward"),
            frame("/usr/lib/python3.11/contextlib.py", 3, "inner"),
            frame("/home/me/train.py", 7, "step"),
            frame("/home/me/train.py", 90, "main"),
            frame("/home/me/train.py", 99, "<module>"),
        ];
        let site = site_of(&frames);
        assert_eq!(site.site, "/home/me/model.py:42 in forward");
        assert_eq!(
            site.via,
            [
                "/home/me/train.py:7 in step",
                "/home/me/train.py:90 in main"
            ]
        );
        let none = site_of(&frames[..1]);
        assert_eq!(none.site, NO_JOB_FRAME);
        assert!(none.via.is_empty());
    }

    #[test]
    fn a_long_file_loses_its_start_and_a_long_function_its_end() {
        let long = format!("/{}/x.py", "d".repeat(1_000_000));
        let name = "f".repeat(500);
        let text = site_text(&frame(&long, 3, &name));
        let (file, rest) = text.split_once(":3 in ").expect("the form");
        assert_eq!(file.chars().count(), MAX_SITE_CHARS);
        assert!(file.starts_with("...") && file.ends_with("/x.py"), "{file}");
        assert_eq!(rest.chars().count(), MAX_FUNCTION_CHARS);
        // Characters, not bytes: a multi-byte name is cut whole.
        let wide = site_text(&frame(&"é".repeat(300), 1, "g"));
        assert_eq!(
            wide.split_once(':').map(|(f, _)| f.chars().count()),
            Some(MAX_SITE_CHARS)
        );
    }
}
