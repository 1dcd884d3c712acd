//! What a distributed run leaves, as files and values: per-rank VTU pieces with a `.pvtu`,
//! point evaluation answered by the owning rank.
