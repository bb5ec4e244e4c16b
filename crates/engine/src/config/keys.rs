//! A `[[feed]]` table's keys as a protocol reads them: the contract a
//! protocol's configuration implements ([`FeedProtocol`]), the keys the
//! shared code leaves to it ([`FeedKeys`]), the ranges of integer keys
//! ([`Range`]) and the one-line problems a resolver returns ([`Problem`]).
//!
//! This file names no protocol and uses nothing above it, so each
//! protocol's folder can build on it (`protocol::<name>::config`).

use super::services::Service;
use crate::state::FeedKind;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::net::SocketAddrV4;

/// A value with where it stood in the file (byte offsets), for error lines.
pub type Sp<T> = toml::Spanned<T>;

/// Nanoseconds in a millisecond: `_ms` keys resolve to ns.
pub const NS_PER_MS: u64 = 1_000_000;

/// Characters of a value, or of a line of the file, echoed in an error.
const ECHO_MAX: usize = 48;

/// A protocol's part of a `[[feed]]` table, implemented by the protocol's
/// resolved settings (each protocol's `config::…Config`):
/// the keys it owns, read and checked by its own code, and the services its
/// feed receives on. The shared code reads every key every feed has (`name`,
/// `protocol`, `lines`, thresholds, clock offset, `source`, overrides) and
/// hands the rest here.
pub trait FeedProtocol: Sized {
    /// The keys it takes, as written in the file. A key of another
    /// protocol is refused with one line naming the protocols it applies
    /// to; any other key as unknown.
    const KEYS: &'static [&'static str];

    /// Its integer keys' ranges (docs/configuration.md's table lists them).
    const RANGES: &'static [Range];

    /// Decimals its feeds' prices print with unless `price_decimals` says.
    const PRICE_DECIMALS: u8;

    /// Keys of other protocols it refuses with a reason of its own:
    /// `(key, why)`, as "`key` does not apply to protocol "x" (`why`)".
    const REFUSED: &'static [(&'static str, &'static str)] = &[];

    /// Reads its keys from `keys` (only those in [`KEYS`](Self::KEYS); each
    /// is there at most once, and none of another protocol).
    fn resolve(keys: &mut FeedKeys) -> Result<Self, Problem>;

    /// Full or delta: what the feed's quotes replace (SQF's `kind`).
    fn kind(&self) -> FeedKind;

    /// The services the feed receives on, in a fixed order (a service's
    /// position sets its line numbers, [`super::services::line_index`]);
    /// the first is the feed's `lines`, given here.
    fn services(&self, lines: &[SocketAddrV4]) -> Vec<Service>;

    /// Why `name` cannot name an instrument of its feeds (a check, an
    /// override, `--explain`), or `None` when it can. By default a symbol:
    /// 1 to 8 printable ASCII characters without spaces.
    fn name_problem(name: &str) -> Option<&'static str> {
        crate::symbol::Symbol::parse(name)
            .is_none()
            .then_some(SYMBOL_RULE)
    }

    /// Slots the feed reserves in the state table: its publisher never
    /// holds more over a run (slots are never freed, so every session's
    /// symbols count), the configuration must leave it them, and the run
    /// holds them for it (no other feed takes them), with the key that
    /// sets the bound (for the error line). `None`: no bound; the feed
    /// reserves one slot and shares what the reservations leave.
    fn reserved_slots(&self) -> Option<(usize, &'static str)> {
        None
    }

    /// Directory entries beyond each slot's first (another name for a
    /// slot, or a name withdrawn) its publisher may make, held for it as
    /// its slots are: no other feed's renames take them. 0 (the default)
    /// for a feed whose slots have one name each.
    fn reserved_names(&self) -> usize {
        0
    }

    /// Takes the paths its keys name from `dir`, the directory of the
    /// configuration file (they are kept as written until then), and
    /// checks that each file read by a replay opens (one read only by
    /// `run` may be checked when it is read): an error is one line naming
    /// the key and the file.
    fn locate_files(&mut self, _dir: &std::path::Path) -> Result<(), String> {
        Ok(())
    }

    /// The files its keys name, as [`locate_files`](Self::locate_files)
    /// left them: what no output of a run or a replay may replace.
    fn files(&self) -> Vec<&std::path::Path> {
        Vec::new()
    }
}

/// What a symbol is, as errors say it.
pub const SYMBOL_RULE: &str = "not a valid symbol (1 to 8 printable ASCII characters, no spaces)";

/// The accepted values of one integer key, both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The table the key is in, as written in the file (`[sidecar]`,
    /// `[[feed]]`; `[[feed]] itch50` for a key of one protocol).
    pub table: &'static str,
    /// The key.
    pub key: &'static str,
    /// Least accepted value.
    pub min: i64,
    /// Greatest accepted value.
    pub max: i64,
    /// The default, where the key is optional.
    pub default: Option<i64>,
    /// Unit of the value.
    pub unit: &'static str,
}

impl Range {
    /// `v` if it is in range, else a problem at its line.
    pub fn check(&self, v: &Sp<i64>) -> Result<i64, Problem> {
        let x = *v.get_ref();
        if (self.min..=self.max).contains(&x) {
            return Ok(x);
        }
        let table = if self.table.starts_with("[[") {
            String::new()
        } else {
            format!("{} ", self.table)
        };
        Err(Problem::at(
            v,
            format!(
                "{table}{} = {x} is out of range: {} to {} {}",
                self.key, self.min, self.max, self.unit
            ),
        ))
    }

    /// `v` checked, or the default when absent.
    pub fn or_default(&self, v: &Option<Sp<i64>>) -> Result<u64, Problem> {
        match v {
            Some(v) => self.check(v).map(|x| x as u64),
            None => Ok(self.default.unwrap_or(self.min) as u64),
        }
    }

    /// What the key takes, for an error about a value of the wrong type:
    /// "1 to 1024 datagrams".
    pub fn accepts(&self) -> String {
        format!("{} to {} {}", self.min, self.max, self.unit)
    }
}

/// A problem found while resolving: a message and where in the file. The
/// caller turns it into the error line (file, line number, message).
#[derive(Debug)]
pub struct Problem {
    /// Byte offset in the file, when known.
    pub(super) at: Option<usize>,
    pub(super) msg: String,
    /// The line of the file is quoted before the message, as for TOML's
    /// own errors (a value of the wrong type).
    pub(super) quote: bool,
}

impl Problem {
    /// `msg` about value `v`, at its line.
    pub fn at<T>(v: &Sp<T>, msg: String) -> Problem {
        Problem::at_offset(Some(v.span().start), msg)
    }

    /// `msg` at byte offset `at` of the file, if known.
    pub fn at_offset(at: Option<usize>, msg: String) -> Problem {
        Problem {
            at,
            msg,
            quote: false,
        }
    }

    /// `msg` about the value at byte offset `at`, its line quoted before it
    /// as TOML's own errors quote it.
    pub(super) fn quoting(at: Option<usize>, msg: String) -> Problem {
        Problem {
            at,
            msg,
            quote: true,
        }
    }

    /// `msg` about the file as a whole.
    pub fn anywhere(msg: String) -> Problem {
        Problem::at_offset(None, msg)
    }

    /// The same problem with `prefix: ` before its message (a problem that
    /// quotes its line, as TOML's own errors do, is left as it is).
    pub fn within(self, prefix: &str) -> Problem {
        if self.quote {
            return self;
        }
        Problem {
            msg: format!("{prefix}: {}", self.msg),
            ..self
        }
    }
}

/// Whether a key's value may be a secret, never shown in an error: its
/// name says password, in any case (the password itself may have been
/// pasted there).
pub fn names_secret(key: &str) -> bool {
    key.to_ascii_lowercase().contains("password")
}

/// `s` for an error line: quoted, control characters escaped, cut after
/// 48 characters (`ECHO_MAX`).
pub fn echo(s: &str) -> String {
    let mut out = String::from("'");
    for (i, c) in s.chars().enumerate() {
        if i == ECHO_MAX {
            out.push_str(&format!("… ({} bytes)", s.len()));
            break;
        }
        out.extend(c.escape_debug());
    }
    out.push('\'');
    out
}

/// The names a setting of type `T` takes, as serde lists them when given
/// one it does not know (`` `spin`, `yield`, `sleep` ``).
pub(super) fn variants<T: DeserializeOwned>() -> Option<String> {
    #[derive(Deserialize)]
    struct Probe<T> {
        #[allow(dead_code)]
        v: T,
    }
    let e = toml::from_str::<Probe<T>>("v = \"\"").err()?;
    // "expected one of `a`, `b`, `c`", or "expected `a` or `b`".
    let (_, names) = e.message().split_once(", expected ")?;
    let names = names.strip_prefix("one of ").unwrap_or(names);
    Some(names.trim().to_string())
}

/// One key of a feed's table left to its protocol.
#[derive(Debug)]
struct Entry {
    key: String,
    value: Sp<toml::Value>,
    taken: bool,
}

/// The keys of one `[[feed]]` table that the shared code does not read, in
/// file order, each with where its value stands: what the feed's protocol
/// resolves ([`FeedProtocol::resolve`]). Each read takes its key; a value
/// of the wrong type is refused as TOML refuses one, naming what the key
/// takes.
#[derive(Debug)]
pub struct FeedKeys {
    entries: Vec<Entry>,
    /// Where the feed's `name` stands: a missing key is reported there.
    name_at: usize,
}

impl FeedKeys {
    /// `entries` of the feed whose `name` stands at byte `name_at`.
    pub(super) fn new(entries: Vec<(String, Sp<toml::Value>)>, name_at: usize) -> FeedKeys {
        let entries = entries
            .into_iter()
            .map(|(key, value)| Entry {
                key,
                value,
                taken: false,
            })
            .collect();
        FeedKeys { entries, name_at }
    }

    /// The keys, in file order, with where each stands.
    pub(super) fn keys(&self) -> impl Iterator<Item = (&str, usize)> {
        self.entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.span().start))
    }

    /// Where `key` stands in the file, taken or not.
    pub fn at(&self, key: &str) -> Option<usize> {
        self.keys().find(|(k, _)| *k == key).map(|(_, at)| at)
    }

    /// Refuses the first of `keys` (in file order) the file sets: each
    /// needs `need`, which the feed has not, so it would do nothing. The
    /// line says "`key` needs `need`".
    pub fn refuse_without(&self, keys: &[&str], need: &str) -> Result<(), Problem> {
        let first = keys
            .iter()
            .filter_map(|k| self.at(k).map(|at| (at, k)))
            .min();
        match first {
            Some((at, key)) => Err(Problem::at_offset(Some(at), format!("{key} needs {need}"))),
            None => Ok(()),
        }
    }

    /// The keys no read has taken.
    pub(super) fn untaken(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|e| !e.taken)
            .map(|e| e.key.as_str())
    }

    /// `key`'s value as a `T`: `None` when absent. A value of the wrong
    /// type is refused with what the key `accepts`; a setting of `named`
    /// values given other than a string, as TOML's own reader says it.
    fn take<T: DeserializeOwned>(
        &mut self,
        key: &str,
        named: bool,
        accepts: impl FnOnce() -> Option<String>,
    ) -> Result<Option<Sp<T>>, Problem> {
        let Some(e) = self.entries.iter_mut().find(|e| e.key == key) else {
            return Ok(None);
        };
        e.taken = true;
        let span = e.value.span();
        let value = e.value.get_ref().clone();
        let parsed = match value {
            toml::Value::String(_) | toml::Value::Table(_) => T::deserialize(value),
            _ if named => Err(serde::de::Error::custom("wanted string or table")),
            _ => T::deserialize(value),
        };
        parsed.map(|v| Some(Sp::new(span.clone(), v))).map_err(|e| {
            // The reader's words quote the value.
            let msg = match names_secret(key) {
                true => "not a quoted string".to_string(),
                // In an operator's words, as the shared keys' ("an
                // integer", not "i64").
                false => plain_words(e.message().trim()),
            };
            let about_type = match named {
                true => msg.contains("wanted string"),
                false => msg.contains("invalid type"),
            };
            let takes = match about_type.then(accepts).flatten() {
                Some(t) => format!(" ({key} is {t})"),
                None => String::new(),
            };
            Problem::quoting(Some(span.start), format!("{msg}{takes}"))
        })
    }

    /// Integer key `range.key`, in its range; `None` when absent.
    pub fn int(&mut self, range: &Range) -> Result<Option<i64>, Problem> {
        match self.take::<i64>(range.key, false, || Some(range.accepts()))? {
            Some(v) => range.check(&v).map(Some),
            None => Ok(None),
        }
    }

    /// Integer key `range.key`, in its range, or its default when absent.
    pub fn int_or_default(&mut self, range: &Range) -> Result<u64, Problem> {
        let v = self.take::<i64>(range.key, false, || Some(range.accepts()))?;
        range.or_default(&v)
    }

    /// String key `key`.
    pub fn text(&mut self, key: &str) -> Result<Option<Sp<String>>, Problem> {
        self.take(key, false, || None)
    }

    /// Boolean key `key`.
    pub fn flag(&mut self, key: &str) -> Result<Option<Sp<bool>>, Problem> {
        self.take(key, false, || Some("true or false".into()))
    }

    /// Key `key` holding a list of strings; anything else is refused,
    /// saying the key is a list of `takes`.
    pub fn strings(&mut self, key: &str, takes: &str) -> Result<Option<Sp<Vec<String>>>, Problem> {
        let Some(v) = self.take::<toml::Value>(key, false, || None)? else {
            return Ok(None);
        };
        let items = match v.get_ref() {
            toml::Value::Array(a) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string))
                .collect::<Option<Vec<String>>>(),
            _ => None,
        };
        match items {
            Some(items) => Ok(Some(Sp::new(v.span(), items))),
            None => Err(Problem::at(&v, format!("{key} must be a list of {takes}"))),
        }
    }

    /// `ip:port` key `key`.
    pub fn addr(&mut self, key: &str) -> Result<Option<Sp<SocketAddrV4>>, Problem> {
        let Some(v) = self.text(key)? else {
            return Ok(None);
        };
        match v.get_ref().parse() {
            Ok(a) => Ok(Some(Sp::new(v.span(), a))),
            Err(_) => Err(Problem::at(
                &v,
                format!("{key}: {} is not an IPv4 ip:port", echo(v.get_ref())),
            )),
        }
    }

    /// Key `key` of named values (`kind = "full"`).
    pub fn named<T: DeserializeOwned>(&mut self, key: &str) -> Result<Option<Sp<T>>, Problem> {
        self.take(key, true, variants::<T>)
    }

    /// A required key is missing: `msg`, at the feed's `name`.
    pub fn missing(&self, msg: String) -> Problem {
        Problem::at_offset(Some(self.name_at), msg)
    }
}

/// For a protocol's unit tests: its keys built from a table's text, as the
/// shared code would hand them over, without the rest of a configuration.
/// This reaches a protocol's [`FeedProtocol::resolve`] before the
/// protocol is in the configuration's switch (where `Config::parse` could
/// not name it), and its problems' text without an error line around it.
/// `msg` with the reader's type names in an operator's words: "expected
/// i64" reads "expected an integer", a sequence reads a list, a map a table.
pub(super) fn plain_words(msg: &str) -> String {
    const WORDS: [(&str, &str); 14] = [
        ("i8", "an integer"),
        ("i16", "an integer"),
        ("i32", "an integer"),
        ("i64", "an integer"),
        ("u8", "a whole number"),
        ("u16", "a whole number"),
        ("u32", "a whole number"),
        ("u64", "a whole number"),
        ("usize", "a whole number"),
        ("f32", "a number"),
        ("f64", "a number"),
        ("a sequence", "a list"),
        ("a map", "a table"),
        ("struct", "table"),
    ];
    let msg = msg
        .replace("invalid type: sequence", "invalid type: list")
        .replace("invalid type: map", "invalid type: table");
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg.as_str();
    while let Some(at) = rest.find("expected ") {
        let (head, tail) = rest.split_at(at + "expected ".len());
        out.push_str(head);
        let word = WORDS.iter().find(|(rust, _)| {
            tail.strip_prefix(rust)
                .is_some_and(|after| !after.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
        });
        rest = match word {
            // A table of the reader's own type: its name says nothing.
            Some(("struct", _)) => {
                out.push_str("a table");
                let after = &tail["struct".len()..];
                let name = after.trim_start_matches(' ');
                let len = name
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(name.len());
                &name[len..]
            }
            Some((rust, plain)) => {
                out.push_str(plain);
                &tail[rust.len()..]
            }
            None => tail,
        };
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
impl FeedKeys {
    /// The keys of `text` (TOML: the protocol's keys only, none of the
    /// keys every feed has), sorted by name; a missing key is reported at
    /// offset 0.
    pub(crate) fn from_toml(text: &str) -> FeedKeys {
        let t: std::collections::BTreeMap<String, Sp<toml::Value>> =
            toml::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        FeedKeys::new(t.into_iter().collect(), 0)
    }

    /// The keys no read has taken, sorted.
    pub(crate) fn left(&self) -> Vec<&str> {
        let mut left: Vec<&str> = self.untaken().collect();
        left.sort_unstable();
        left
    }
}

#[cfg(test)]
impl Problem {
    /// The message, without the file and line the caller puts before it.
    pub(crate) fn message(&self) -> &str {
        &self.msg
    }

    /// Byte offset in the file, when known.
    pub(crate) fn offset(&self) -> Option<usize> {
        self.at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(text: &str) -> FeedKeys {
        FeedKeys::from_toml(text)
    }

    const R: Range = Range {
        table: "[[feed]] test",
        key: "n",
        min: 1,
        max: 9,
        default: Some(5),
        unit: "things",
    };

    #[test]
    fn reads_take_their_key_and_check_it() {
        let mut k = keys("n = 3\ns = \"x\"\na = \"1.2.3.4:5\"\nz = 1\n");
        assert_eq!(k.int(&R).unwrap(), Some(3));
        assert_eq!(k.text("s").unwrap().unwrap().into_inner(), "x");
        assert_eq!(
            k.addr("a").unwrap().unwrap().into_inner(),
            "1.2.3.4:5".parse::<SocketAddrV4>().unwrap()
        );
        assert_eq!(k.untaken().collect::<Vec<_>>(), ["z"]);
        assert_eq!(
            k.int_or_default(&R).unwrap(),
            3,
            "a taken key keeps its value"
        );
        assert_eq!(keys("").int_or_default(&R).unwrap(), 5);
        let e = keys("n = 10\n").int(&R).unwrap_err();
        assert_eq!(e.msg, "n = 10 is out of range: 1 to 9 things");
        let e = keys("n = \"1\"\n").int(&R).unwrap_err();
        assert!(e.quote);
        assert_eq!(
            e.msg,
            "invalid type: string \"1\", expected an integer (n is 1 to 9 things)"
        );
        let e = keys("n = [1]\n").int(&R).unwrap_err();
        assert_eq!(
            e.msg,
            "invalid type: list, expected an integer (n is 1 to 9 things)"
        );
        let e = keys("a = \"x\"\n").addr("a").unwrap_err();
        assert_eq!(e.msg, "a: 'x' is not an IPv4 ip:port");
    }

    #[test]
    fn flags_and_lists_of_strings() {
        let mut k = keys("b = false\nl = [\"x\", \"y\"]\ne = []\n");
        assert_eq!(k.flag("b").unwrap().map(Sp::into_inner), Some(false));
        assert_eq!(k.flag("c").unwrap(), None);
        assert_eq!(
            k.strings("l", "names").unwrap().unwrap().into_inner(),
            ["x", "y"]
        );
        assert!(k
            .strings("e", "names")
            .unwrap()
            .unwrap()
            .get_ref()
            .is_empty());
        assert_eq!(k.untaken().count(), 0);
        let e = keys("b = \"yes\"\n").flag("b").unwrap_err();
        assert!(e.quote);
        assert!(e.msg.ends_with("(b is true or false)"), "{}", e.msg);
        for bad in ["l = \"x\"", "l = [1]", "l = [\"x\", 2]", "l = [[\"x\"]]"] {
            let e = keys(bad).strings("l", "names").unwrap_err();
            assert_eq!(e.msg, "l must be a list of names", "{bad}");
        }
    }

    /// A setting of named values, as a protocol declares one.
    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Kind {
        Full,
        Delta,
    }

    #[test]
    fn a_named_value_given_a_number_names_the_values() {
        let e = keys("kind = 2\n").named::<Kind>("kind").unwrap_err();
        assert_eq!(e.msg, "wanted string or table (kind is `full` or `delta`)");
        let e = keys("kind = \"x\"\n").named::<Kind>("kind").unwrap_err();
        assert_eq!(e.msg, "unknown variant `x`, expected `full` or `delta`");
    }
}
