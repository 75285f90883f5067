//! Reload's decision, without a cluster.
