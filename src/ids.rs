//! Identifiers: each kind of payd object's id type, defined with the stored values
//! (`payd_model::ids`) so the entities name them.

pub use payd_model::ids::*;
