//! Placeholder; being built (issue 6).
