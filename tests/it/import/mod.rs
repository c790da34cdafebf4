//! `sluice import-nginx`: the corpus of real-world nginx.conf shapes.

mod corpus;
