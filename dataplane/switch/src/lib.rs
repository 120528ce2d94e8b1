//! barrier-switch (issue 4). Placeholder until the crate lands.
#![forbid(unsafe_code)]
