//! Packet captures.
