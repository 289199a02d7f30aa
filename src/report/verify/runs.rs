//! `verify --runs`: see below.
