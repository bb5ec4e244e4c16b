//! No import circles between the crate's module files, so the layering can
//! be read from the folders: sys and time, wire views, protocol rules, state,
//! publication, reader; handler, replay and sidecar above; the binaries on
//! top. A module file may use what lies below it, never what lies above.
//!
//! The graph, read from the sources (self-contained: no parser crate, so the
//! file can move into any test binary):
//!
//! - Nodes are module files: `lib.rs`, `main.rs`, each `x.rs` and each
//!   folder's `mod.rs` (its own node, apart from the files beside it).
//!   Inline `mod x { .. }` blocks belong to the file they are written in.
//!   The files are found by following `mod x;` declarations (and
//!   `#[path]`) from each crate root (`src/lib.rs`, `src/main.rs`,
//!   `src/bin/*.rs`, of the package and of each `crates/*/src` of a
//!   workspace); every `.rs` file under those `src` folders must be reached,
//!   or be a test-only module, else the test fails.
//! - An edge A → B is a path in A's code that names module file B or an item
//!   in it: `use` declarations (`crate::`, `super::`, `self::`, a child
//!   module, a name bound by another `use`, the package's own crate name),
//!   and paths written in the code (`crate::a::b::f()`, `super::x`,
//!   `rules::heartbeat` after `use ..::rules`). Each resolves to the deepest
//!   module file on the path, through `use` re-exports to where the item is
//!   defined: a re-export is an edge of its own file and hides nothing. A
//!   `use` of a module is no edge by itself (the paths through it are); a
//!   glob `use m::*` is an edge to `m`.
//! - Not counted: a module's edges to the modules inside it (its `mod x;`
//!   declarations, re-exports and calls into its own children and their
//!   children: they are its parts, which may in turn use what it defines,
//!   through `super::`); comments (doc links included); string literals;
//!   external crates; everything under a `#[cfg(..)]` that holds only in
//!   tests (`#[cfg(test)] mod tests { .. }`, `#[cfg(test)] fn ..`,
//!   `mod tests;`). A child's edges to its parent do count.
//!
//! On a circle the test prints each one found, with the line that makes
//! each edge.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

#[test]
fn module_files_import_no_circle() {
    let root = workspace_root();
    let graph = Graph::read(&root);
    assert!(
        graph.stray.is_empty(),
        "files under src/ that no module declaration reaches (a stray file, or a \
         declaration this test does not understand): {:#?}",
        graph.stray
    );
    let (files, edges) = (graph.files.len(), graph.edges.len());
    assert!(
        files >= 2 && edges + 1 >= files,
        "read {files} module files and {edges} edges: the sources were not read"
    );
    let circles = graph.circles();
    assert!(
        circles.is_empty(),
        "{} import circle(s) between module files:\n{}",
        circles.len(),
        circles
            .iter()
            .map(|c| graph.describe(c))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Protocols are named in their own folders (`src/protocol/<name>/` of
/// the engine) and in files named after them (a venue's simulator, demo,
/// explain text or file replay: `sqf.rs`, `itch50.rs`, `explain/sqf/`);
/// elsewhere only the configuration's protocol switch (`config.rs`) and
/// the command line (`main.rs`, `main/cli.rs`: which simulator, demo,
/// explain or file replay to run) may name one. Code only: comments,
/// string literals and `#[cfg(test)] mod tests` do not count.
#[test]
fn protocols_are_named_only_where_they_belong() {
    const PROTOCOLS: [&str; 4] = ["sqf", "itch50", "itch", "mdp3"];
    const ALLOWED: [&str; 3] = [
        "crates/engine/src/config.rs",
        "src/main.rs",
        "src/main/cli.rs",
    ];
    let root = workspace_root();
    let mut roots = vec![root.join("src")];
    if let Ok(dir) = fs::read_dir(root.join("crates")) {
        roots.extend(dir.flatten().map(|e| e.path().join("src")));
    }
    let mut files = BTreeSet::new();
    for r in &roots {
        rs_files(r, &mut files);
    }
    let mut naming = Vec::new();
    for file in &files {
        let rel = file
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let parts: Vec<&str> = rel.trim_end_matches(".rs").split('/').collect();
        if parts.contains(&"protocol") || parts.iter().any(|p| PROTOCOLS.contains(p)) {
            continue;
        }
        let src = fs::read_to_string(file).unwrap();
        let code = src.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        let tokens: Vec<String> = code_identifiers(code).collect();
        // `mod sqf;` declares a protocol's file: the file is checked, not
        // the declaration.
        let names: BTreeSet<String> = tokens
            .iter()
            .enumerate()
            .filter(|(i, _)| *i == 0 || tokens[i - 1] != "mod")
            .map(|(_, t)| t.clone())
            .filter(|t| {
                let lower = t.to_lowercase();
                PROTOCOLS.iter().any(|p| lower.starts_with(p))
                    || t.contains("Sqf")
                    || t.contains("Itch")
                    || t.contains("Mdp3")
            })
            .collect();
        if !names.is_empty() {
            naming.push((rel, names));
        }
    }
    let found: Vec<&str> = naming.iter().map(|(f, _)| f.as_str()).collect();
    assert!(
        found.iter().all(|f| ALLOWED.contains(f)),
        "files outside the protocols' folders that name a protocol: {naming:#?}"
    );
    assert!(
        found.len() >= 2,
        "the switch and the command line name protocols, so the scan read nothing: {naming:?}"
    );
}

/// The identifiers of Rust code, outside comments and string literals.
fn code_identifiers(code: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut chars = code.chars().peekable();
    let mut word = String::new();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '\'' => {
                // A character literal ('"', '\'', 'x'), else a lifetime.
                let ahead: Vec<char> = chars.clone().take(3).collect();
                match ahead.as_slice() {
                    ['\\', _, '\''] => drop(chars.nth(2)),
                    [_, '\'', ..] => drop(chars.nth(1)),
                    _ => {}
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    match c {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => break,
                        _ => escaped = false,
                    }
                }
            }
            c if c.is_alphanumeric() || c == '_' => {
                word.push(c);
                continue;
            }
            _ => {}
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out.into_iter()
}

/// The topmost folder holding a `Cargo.toml` with `[workspace]` above the
/// package being tested, or the package itself.
fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.ancestors()
        .filter(|d| {
            fs::read_to_string(d.join("Cargo.toml")).is_ok_and(|t| t.contains("[workspace]"))
        })
        .last()
        .unwrap_or(here)
        .to_path_buf()
}

// ---------------------------------------------------------------------------
// Tokens

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
    Str(String),
    /// A number, char or lifetime: nothing a path is made of.
    Other,
}

/// The file's tokens with their 1-based lines; comments and whitespace gone.
fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    while i < c.len() {
        let ch = c[i];
        let start_line = line;
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if c[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if ch == '"' {
            let (s, next) = string(&c, i + 1, 0, &mut line);
            out.push((Tok::Str(s), start_line));
            i = next;
        } else if ch == '\'' {
            // A char literal ('a', '\n', '\u{..}') or a lifetime ('a).
            if at(i + 1) == '\\' {
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
            }
            out.push((Tok::Other, start_line));
        } else if ch.is_ascii_digit() {
            while at(i).is_alphanumeric()
                || at(i) == '_'
                || (at(i) == '.' && at(i + 1).is_ascii_digit())
            {
                i += 1;
            }
            out.push((Tok::Other, start_line));
        } else if ch.is_alphabetic() || ch == '_' {
            let s = i;
            while at(i).is_alphanumeric() || at(i) == '_' {
                i += 1;
            }
            let word: String = c[s..i].iter().collect();
            let raw = matches!(word.as_str(), "r" | "br" | "cr");
            let hashes = (i..).take_while(|&j| at(j) == '#').count();
            if raw && at(i + hashes) == '"' {
                let (s, next) = string(&c, i + hashes + 1, hashes, &mut line);
                out.push((Tok::Str(s), start_line));
                i = next;
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                let (s, next) = string(&c, i + 1, 0, &mut line);
                out.push((Tok::Str(s), start_line));
                i = next;
            } else if word == "b" && at(i) == '\'' {
                i += if at(i + 1) == '\\' { 3 } else { 1 };
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
                out.push((Tok::Other, start_line));
            } else if word == "r" && hashes == 1 && (at(i + 1).is_alphabetic() || at(i + 1) == '_')
            {
                // A raw identifier, r#name.
                let s = i + 1;
                i = s;
                while at(i).is_alphanumeric() || at(i) == '_' {
                    i += 1;
                }
                out.push((Tok::Ident(c[s..i].iter().collect()), start_line));
            } else {
                out.push((Tok::Ident(word), start_line));
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push((Tok::Sep, start_line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), start_line));
            i += 1;
        }
    }
    out
}

/// A string literal's text from `i` (just past the opening quote) to its
/// closing quote followed by `hashes` `#`s (0: an ordinary string, with
/// escapes); the text and the index past the end.
fn string(c: &[char], mut i: usize, hashes: usize, line: &mut usize) -> (String, usize) {
    let s = i;
    while i < c.len() {
        match c[i] {
            '\\' if hashes == 0 => i += 1,
            '"' if (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) => {
                return (c[s..i].iter().collect(), i + 1 + hashes);
            }
            '\n' => *line += 1,
            _ => {}
        }
        i += 1;
    }
    (c[s..].iter().collect(), c.len())
}

// ---------------------------------------------------------------------------
// Modules

type ModId = usize;
type FileId = usize;
/// Where a path ends: the module, and whether the path names the module
/// itself (else an item in it); `None` outside the workspace.
type Resolved = Option<(ModId, bool)>;

#[derive(Default)]
struct Module {
    file: FileId,
    krate: usize,
    parent: Option<ModId>,
    /// Child modules by name, in files or inline.
    children: BTreeMap<String, ModId>,
    /// Names bound by `use`: name → path as written, with its line.
    uses: Vec<(String, Vec<String>, usize)>,
    /// Glob imports: `use path::*`.
    globs: Vec<(Vec<String>, usize)>,
    /// Paths of two segments or more written in the code.
    paths: Vec<(Vec<String>, usize)>,
}

struct Crate {
    /// The name other crates of the workspace use it by (a library), if any.
    name: Option<String>,
    root: ModId,
}

#[derive(Default)]
struct Graph {
    root: PathBuf,
    files: Vec<PathBuf>,
    modules: Vec<Module>,
    crates: Vec<Crate>,
    /// Files declared only under a test-only `cfg`.
    test_only: Vec<PathBuf>,
    /// Files under a `src` folder that no declaration reaches.
    stray: Vec<PathBuf>,
    /// (from, to) → the first line (in `from`) and path that makes the edge.
    edges: BTreeMap<(FileId, FileId), (usize, String)>,
}

impl Graph {
    fn read(root: &Path) -> Graph {
        let mut g = Graph {
            root: root.to_path_buf(),
            ..Graph::default()
        };
        let mut packages = vec![root.to_path_buf()];
        if let Ok(dir) = fs::read_dir(root.join("crates")) {
            let mut more: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
            more.sort();
            packages.extend(more.into_iter().filter(|p| p.join("src").is_dir()));
        }
        let mut all = BTreeSet::new();
        for package in &packages {
            let src = package.join("src");
            rs_files(&src, &mut all);
            let lib_name = lib_name(package);
            let mut roots = vec![(src.join("lib.rs"), lib_name), (src.join("main.rs"), None)];
            if let Ok(dir) = fs::read_dir(src.join("bin")) {
                let mut bins: Vec<PathBuf> = dir.flatten().map(|e| e.path()).collect();
                bins.sort();
                roots.extend(bins.into_iter().map(|b| (b, None)));
            }
            for (file, name) in roots {
                if file.is_file() {
                    let krate = g.crates.len();
                    let root = g.new_module(krate, None, Some(&file));
                    g.crates.push(Crate { name, root });
                    g.parse(root, &file, true);
                }
            }
        }
        let reached: BTreeSet<&PathBuf> = g.files.iter().collect();
        g.stray = all
            .iter()
            .filter(|f| !reached.contains(f))
            .filter(|f| {
                !g.test_only
                    .iter()
                    .any(|t| *f == t || f.starts_with(t.with_extension("")))
            })
            .cloned()
            .collect();
        g.link();
        g
    }

    fn new_module(&mut self, krate: usize, parent: Option<ModId>, file: Option<&Path>) -> ModId {
        let file = match file {
            Some(f) => {
                self.files.push(f.to_path_buf());
                self.files.len() - 1
            }
            None => self.modules[parent.expect("an inline module has a parent")].file,
        };
        self.modules.push(Module {
            file,
            krate,
            parent,
            ..Module::default()
        });
        self.modules.len() - 1
    }

    /// Reads module file `path` as module `m`; `mod_rs`: its children live
    /// in its own folder (`lib.rs`, `main.rs`, `mod.rs`), not in one named
    /// after it.
    fn parse(&mut self, m: ModId, path: &Path, mod_rs: bool) {
        let src = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let toks = tokens(&src);
        let dir = path.parent().unwrap().to_path_buf();
        let child_dir = if mod_rs {
            dir.clone()
        } else {
            dir.join(path.file_stem().unwrap())
        };
        // Open inline modules: (module, brace depth inside it, its folder).
        let mut stack: Vec<(ModId, usize, PathBuf)> = vec![(m, 0, child_dir)];
        let mut depth = 0;
        let mut test_only = false;
        let mut path_attr: Option<String> = None;
        let mut i = 0;
        while i < toks.len() {
            let (cur, _, cur_dir) = stack.last().unwrap().clone();
            let line = toks[i].1;
            match &toks[i].0 {
                Tok::Punct('#') => {
                    // An attribute: #[..] or #![..].
                    let mut j = i + 1;
                    let inner = toks.get(j).map(|t| &t.0) == Some(&Tok::Punct('!'));
                    if inner {
                        j += 1;
                    }
                    let end = matching(&toks, j);
                    let attr = &toks[j + 1..end];
                    if !inner {
                        if let Some(Tok::Ident(name)) = attr.first().map(|t| &t.0) {
                            if name == "cfg" && eval_cfg(&attr[1..]) == Some(false) {
                                test_only = true;
                            }
                            if name == "path" {
                                if let Some(Tok::Str(p)) = attr.get(2).map(|t| &t.0) {
                                    path_attr = Some(p.clone());
                                }
                            }
                        }
                    }
                    i = end + 1;
                    continue;
                }
                _ if test_only => {
                    // Skip the item; note a `mod x;` so its file is known.
                    let item = skip_item(&toks, i);
                    if let Some(file) = mod_decl(&toks[i..item]).and_then(|(name, inline)| {
                        (!inline).then(|| child_file(&dir, &cur_dir, &name, path_attr.as_deref()))
                    }) {
                        self.test_only.push(file.0);
                    }
                    test_only = false;
                    path_attr = None;
                    i = item;
                    continue;
                }
                Tok::Ident(w) if w == "use" => {
                    let mut j = i + 1;
                    let mut bound = Vec::new();
                    use_tree(&toks, &mut j, Vec::new(), &mut bound);
                    for (name, target) in bound {
                        match name {
                            Some(name) => self.modules[cur].uses.push((name, target, line)),
                            None => self.modules[cur].globs.push((target, line)),
                        }
                    }
                    while j < toks.len() && toks[j].0 != Tok::Punct(';') {
                        j += 1;
                    }
                    i = j + 1;
                    path_attr = None;
                    continue;
                }
                Tok::Ident(w) if w == "mod" => {
                    if let Some((name, inline)) = mod_decl(&toks[i..]) {
                        let krate = self.modules[cur].krate;
                        if inline {
                            let child = self.new_module(krate, Some(cur), None);
                            self.modules[cur].children.insert(name.clone(), child);
                            depth += 1;
                            stack.push((child, depth, cur_dir.join(&name)));
                            i += 3;
                        } else {
                            let (file, mod_rs) =
                                child_file(&dir, &cur_dir, &name, path_attr.as_deref());
                            if !file.is_file() {
                                panic!(
                                    "{}:{line}: `mod {name};` has no file {}",
                                    path.display(),
                                    file.display()
                                );
                            }
                            let child = self.new_module(krate, Some(cur), Some(&file));
                            self.modules[cur].children.insert(name, child);
                            self.parse(child, &file, mod_rs);
                            i += 3;
                        }
                        path_attr = None;
                        continue;
                    }
                }
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    if stack.len() > 1 && stack.last().unwrap().1 == depth {
                        stack.pop();
                    }
                    depth = depth.saturating_sub(1);
                }
                Tok::Ident(_) if i == 0 || toks[i - 1].0 != Tok::Sep => {
                    let mut segs = Vec::new();
                    let mut j = i;
                    while let Some(Tok::Ident(s)) = toks.get(j).map(|t| &t.0) {
                        segs.push(s.clone());
                        if toks.get(j + 1).map(|t| &t.0) == Some(&Tok::Sep)
                            && matches!(toks.get(j + 2).map(|t| &t.0), Some(Tok::Ident(_)))
                        {
                            j += 2;
                        } else {
                            break;
                        }
                    }
                    if segs.len() >= 2 {
                        self.modules[cur].paths.push((segs, line));
                    }
                    i = j + 1;
                    continue;
                }
                Tok::Sep
                    if matches!(toks.get(i + 1).map(|t| &t.0), Some(Tok::Ident(_)))
                        && !matches!(
                            toks.get(i.wrapping_sub(1)).map(|t| &t.0),
                            Some(Tok::Ident(_)) | Some(Tok::Punct('>'))
                        ) =>
                {
                    // `::name::..`: a crate's path (this workspace's, or none).
                    let mut segs = vec!["::".to_string()];
                    let mut j = i + 1;
                    while let Some(Tok::Ident(s)) = toks.get(j).map(|t| &t.0) {
                        segs.push(s.clone());
                        if toks.get(j + 1).map(|t| &t.0) == Some(&Tok::Sep)
                            && matches!(toks.get(j + 2).map(|t| &t.0), Some(Tok::Ident(_)))
                        {
                            j += 2;
                        } else {
                            break;
                        }
                    }
                    self.modules[cur].paths.push((segs, line));
                    i = j + 1;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// Resolves every binding and path to a module file.
    fn link(&mut self) {
        let mut edges = BTreeMap::new();
        for m in 0..self.modules.len() {
            let from = self.modules[m].file;
            let mut found: Vec<(Resolved, usize, String)> = Vec::new();
            for (_, target, line) in &self.modules[m].uses {
                // A `use` of a module is no edge of its own: paths through it are.
                let r = self.resolve(m, target, 0).filter(|&(_, module)| !module);
                found.push((r, *line, target.join("::")));
            }
            for (target, line) in &self.modules[m].globs {
                found.push((self.resolve(m, target, 0), *line, target.join("::") + "::*"));
            }
            for (path, line) in &self.modules[m].paths {
                found.push((self.resolve(m, path, 0), *line, path.join("::")));
            }
            for (r, line, text) in found {
                if let Some((to, _)) = r {
                    let to = self.modules[to].file;
                    if to != from && !self.holds(from, to) {
                        edges.entry((from, to)).or_insert((line, text));
                    }
                }
            }
        }
        self.edges = edges;
    }

    /// The module a path written in module `m` ends in: `(module, true)`
    /// when the path names the module itself, `(module, false)` for an item
    /// defined in it; `None` outside the workspace (std, dependencies,
    /// locals, types' own paths).
    fn resolve(&self, m: ModId, path: &[String], hops: usize) -> Resolved {
        if hops > 32 {
            return None;
        }
        let krate = self.modules[m].krate;
        let (mut cur, rest) = match path.first()?.as_str() {
            "crate" | "$crate" => (self.crates[krate].root, &path[1..]),
            "super" | "self" => (m, path),
            "::" => (self.crate_named(path.get(1)?)?, &path[2..]),
            first => {
                if self.modules[m].children.contains_key(first) {
                    (m, path)
                } else if let Some((_, target, _)) =
                    self.modules[m].uses.iter().find(|u| u.0 == first)
                {
                    let mut full = target.clone();
                    full.extend_from_slice(&path[1..]);
                    return self.resolve(m, &full, hops + 1);
                } else {
                    (self.crate_named(first)?, &path[1..])
                }
            }
        };
        for (k, seg) in rest.iter().enumerate() {
            let module = &self.modules[cur];
            match seg.as_str() {
                "super" => cur = module.parent?,
                "self" => {}
                _ => {
                    if let Some(&child) = module.children.get(seg) {
                        cur = child;
                    } else if let Some((_, target, _)) = module.uses.iter().find(|u| &u.0 == seg) {
                        // A re-export: on to where the item is defined (an
                        // item of a dependency re-exported here is this file's).
                        let mut full = target.clone();
                        full.extend_from_slice(&rest[k + 1..]);
                        return self.resolve(cur, &full, hops + 1).or(Some((cur, false)));
                    } else {
                        return Some((cur, false));
                    }
                }
            }
        }
        Some((cur, true))
    }

    /// Whether file `to` is a module inside file `from`'s module (its
    /// child, grandchild..).
    fn holds(&self, from: FileId, to: FileId) -> bool {
        let mut m = self
            .modules
            .iter()
            .position(|m| m.file == to)
            .and_then(|m| self.modules[m].parent);
        while let Some(p) = m {
            if self.modules[p].file == from {
                return true;
            }
            m = self.modules[p].parent;
        }
        false
    }

    fn crate_named(&self, name: &str) -> Option<ModId> {
        self.crates
            .iter()
            .find(|c| c.name.as_deref() == Some(name))
            .map(|c| c.root)
    }

    /// The circles: for each set of files that reach one another, shortest
    /// circles until every edge among them is in one.
    fn circles(&self) -> Vec<Vec<FileId>> {
        let n = self.files.len();
        let mut out: Vec<Vec<FileId>> = vec![Vec::new(); n];
        for &(a, b) in self.edges.keys() {
            out[a].push(b);
        }
        let mut circles = Vec::new();
        for scc in tarjan(&out).into_iter().filter(|s| s.len() > 1) {
            let inside: BTreeSet<FileId> = scc.into_iter().collect();
            let mut covered = BTreeSet::new();
            for &(a, b) in self.edges.keys() {
                if !inside.contains(&a) || !inside.contains(&b) || covered.contains(&(a, b)) {
                    continue;
                }
                // a -> b, then the shortest way from b back to a.
                let mut circle = vec![a];
                circle.extend(shortest_path(&out, b, a, &inside));
                circle.pop();
                for k in 0..circle.len() {
                    covered.insert((circle[k], circle[(k + 1) % circle.len()]));
                }
                circles.push(circle);
            }
        }
        circles
    }

    fn name(&self, f: FileId) -> String {
        let p = &self.files[f];
        p.strip_prefix(&self.root)
            .unwrap_or(p)
            .display()
            .to_string()
    }

    fn describe(&self, circle: &[FileId]) -> String {
        let mut s = String::from("  ");
        for &f in circle {
            s += &self.name(f);
            s += " -> ";
        }
        s += &self.name(circle[0]);
        for (k, &a) in circle.iter().enumerate() {
            let b = circle[(k + 1) % circle.len()];
            let (line, path) = &self.edges[&(a, b)];
            s += &format!("\n      {}:{line} uses {path}", self.name(a));
        }
        s
    }
}

/// The package's library name as other crates write it, if it has a library.
fn lib_name(package: &Path) -> Option<String> {
    if !package.join("src/lib.rs").is_file() {
        return None;
    }
    let toml = fs::read_to_string(package.join("Cargo.toml")).ok()?;
    let mut section = "";
    let (mut package_name, mut lib) = (None, None);
    for line in toml.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
        } else if let Some(v) = line.strip_prefix("name").map(str::trim_start) {
            if let Some(v) = v.strip_prefix('=') {
                let v = v.trim().trim_matches('"').replace('-', "_");
                match section {
                    "[package]" => package_name = Some(v),
                    "[lib]" => lib = Some(v),
                    _ => {}
                }
            }
        }
    }
    lib.or(package_name)
}

fn rs_files(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.insert(p);
        }
    }
}

/// The index of the bracket closing the one at `open`.
fn matching(toks: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0;
    for (k, (t, _)) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    toks.len() - 1
}

/// The index past the item, field or statement starting at `i`: its `;`,
/// its closing `}` (not counting a `use`'s braces), or the `,` ending a
/// field; stops before a bracket it did not open.
fn skip_item(toks: &[(Tok, usize)], i: usize) -> usize {
    let is_use = toks[i..]
        .iter()
        .find(|t| !matches!(&t.0, Tok::Ident(w) if w == "pub") && t.0 != Tok::Punct('('))
        .is_some_and(|t| t.0 == Tok::Ident("use".into()));
    let mut j = i;
    while j < toks.len() {
        match toks[j].0 {
            Tok::Punct(';') | Tok::Punct(',') => return j + 1,
            Tok::Punct('{') if !is_use => return matching(toks, j) + 1,
            Tok::Punct('(' | '[' | '{') => j = matching(toks, j),
            Tok::Punct(')' | ']' | '}') => return j,
            _ => {}
        }
        j += 1;
    }
    j
}

/// `mod name;` or `mod name {` at the start of `toks` (after visibility):
/// the name, and whether it is inline.
fn mod_decl(toks: &[(Tok, usize)]) -> Option<(String, bool)> {
    let k = toks.iter().position(|t| t.0 == Tok::Ident("mod".into()))?;
    if toks[..k].iter().any(|t| !matches!(&t.0, Tok::Ident(w) if w == "pub" || w == "crate" || w == "super" || w == "in" || w == "self") && !matches!(t.0, Tok::Punct('(' | ')') | Tok::Sep)) {
        return None;
    }
    let Some(Tok::Ident(name)) = toks.get(k + 1).map(|t| &t.0) else {
        return None;
    };
    match toks.get(k + 2).map(|t| &t.0) {
        Some(Tok::Punct(';')) => Some((name.clone(), false)),
        Some(Tok::Punct('{')) => Some((name.clone(), true)),
        _ => None,
    }
}

/// Where `mod name;` lives, and whether its children live beside it
/// (`mod.rs` or a `#[path]` file) rather than in a folder named after it.
fn child_file(
    file_dir: &Path,
    mod_dir: &Path,
    name: &str,
    path_attr: Option<&str>,
) -> (PathBuf, bool) {
    if let Some(p) = path_attr {
        return (file_dir.join(p), true);
    }
    let flat = mod_dir.join(format!("{name}.rs"));
    if flat.is_file() {
        (flat, false)
    } else {
        (mod_dir.join(name).join("mod.rs"), true)
    }
}

/// Reads a `use` tree from `toks[*j]`: each binding as (name, path) and
/// each glob as (None, path).
fn use_tree(
    toks: &[(Tok, usize)],
    j: &mut usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    loop {
        match toks.get(*j).map(|t| &t.0) {
            Some(Tok::Sep) => {
                if prefix.is_empty() {
                    prefix.push("::".into());
                }
                *j += 1;
            }
            Some(Tok::Punct('$')) => *j += 1,
            Some(Tok::Punct('{')) => {
                *j += 1;
                loop {
                    match toks.get(*j).map(|t| &t.0) {
                        Some(Tok::Punct('}')) | None => {
                            *j += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *j += 1,
                        _ => use_tree(toks, j, prefix.clone(), out),
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                *j += 1;
                out.push((None, prefix));
                return;
            }
            Some(Tok::Ident(name)) => {
                let name = name.clone();
                *j += 1;
                if toks.get(*j).map(|t| &t.0) == Some(&Tok::Sep) {
                    *j += 1;
                    prefix.push(name);
                    continue;
                }
                let (mut bound, target) = if name == "self" {
                    (prefix.last().cloned().unwrap_or_default(), prefix)
                } else {
                    let mut t = prefix;
                    t.push(name.clone());
                    (name, t)
                };
                if toks.get(*j).map(|t| &t.0) == Some(&Tok::Ident("as".into())) {
                    if let Some(Tok::Ident(alias)) = toks.get(*j + 1).map(|t| &t.0) {
                        bound = alias.clone();
                    }
                    *j += 2;
                }
                out.push((Some(bound), target));
                return;
            }
            _ => return,
        }
    }
}

/// A `cfg(..)` predicate (tokens after `cfg`) when not testing: `Some(false)`
/// when it holds only under `test`, `None` when it turns on other options.
fn eval_cfg(toks: &[(Tok, usize)]) -> Option<bool> {
    fn pred(t: &[(Tok, usize)], i: &mut usize) -> Option<bool> {
        let Some(Tok::Ident(name)) = t.get(*i).map(|t| t.0.clone()) else {
            *i += 1;
            return None;
        };
        *i += 1;
        if t.get(*i).map(|t| &t.0) == Some(&Tok::Punct('(')) {
            *i += 1;
            let mut args = Vec::new();
            while !matches!(t.get(*i).map(|t| &t.0), Some(Tok::Punct(')')) | None) {
                args.push(pred(t, i));
                if t.get(*i).map(|t| &t.0) == Some(&Tok::Punct(',')) {
                    *i += 1;
                }
            }
            *i += 1;
            return match name.as_str() {
                "all" if args.contains(&Some(false)) => Some(false),
                "all" if args.iter().all(|a| *a == Some(true)) => Some(true),
                "any" if args.contains(&Some(true)) => Some(true),
                "any" if args.iter().all(|a| *a == Some(false)) => Some(false),
                "not" => args.first().copied().flatten().map(|a| !a),
                _ => None,
            };
        }
        if t.get(*i).map(|t| &t.0) == Some(&Tok::Punct('=')) {
            *i += 2;
            return None;
        }
        if name == "test" {
            Some(false)
        } else {
            None
        }
    }
    let inner = toks.get(1..toks.len().saturating_sub(1))?;
    pred(inner, &mut 0)
}

/// Tarjan's strongly connected components.
fn tarjan(out: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct S<'a> {
        out: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        sccs: Vec<Vec<usize>>,
    }
    fn visit(s: &mut S, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for k in 0..s.out[v].len() {
            let w = s.out[v][k];
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                _ => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                scc.push(w);
                if w == v {
                    break;
                }
            }
            s.sccs.push(scc);
        }
    }
    let n = out.len();
    let mut s = S {
        out,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        sccs: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.sccs
}

/// A shortest path from `from` to `to` within `inside`, both ends included.
fn shortest_path(
    out: &[Vec<usize>],
    from: usize,
    to: usize,
    inside: &BTreeSet<usize>,
) -> Vec<usize> {
    let mut prev: HashMap<usize, usize> = HashMap::from([(from, from)]);
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(v) = queue.pop_front() {
        if v == to {
            let mut path = vec![to];
            while *path.last().unwrap() != from {
                path.push(prev[path.last().unwrap()]);
            }
            path.reverse();
            return path;
        }
        for &w in &out[v] {
            if inside.contains(&w) && !prev.contains_key(&w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("files of one strongly connected set reach one another")
}
