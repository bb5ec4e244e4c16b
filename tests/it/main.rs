//! The integration tests, one binary: each module was a test crate of its
//! own (`tests/NAME.rs`), each linking the whole library and its
//! dependencies; as modules of one crate they link once. A test's name is
//! `MODULE::TEST` (`cargo nextest run -E 'test(/^netns::/)'` runs one
//! module's tests; `cargo test --test it netns::` too).
//!
//! What one test of a module does to its process is now seen by the tests
//! of every module, under `cargo test` (tests as threads of one process):
//! the shared-memory paths and namespaces of different tests differ (each
//! holds a name of its own and the pid), no test changes the environment
//! or the working directory, and the counting allocator of `alloc` counts
//! only the thread under measurement.

mod alloc;
mod bench_gen;
mod c_reader;
mod cli;
mod common;
mod config;
mod contrib;
mod docs;
mod explain;
mod explain_agrees;
mod fuzz;
mod inspect;
mod itch_fixtures;
mod itch_live;
mod itch_model;
mod itch_publish;
mod itch_replay;
mod layering;
mod live;
mod logs;
mod mdp3_fixtures;
mod mdp3_live;
mod mdp3_model;
mod mdp3_replay;
mod mdp3_spec;
mod metrics;
mod model;
mod naive;
mod netns;
mod publication;
mod replay_bounds;
mod simulate;
mod simulate_itch;
mod simulate_mdp3;
mod sqf_lines;
mod stat;
