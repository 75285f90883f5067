//! kubewasm
