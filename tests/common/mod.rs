//! Helpers shared by strata's integration tests (`mod common;`).
#![allow(dead_code)]

pub mod doctor;
pub mod exposition;
pub mod fake_nvml;
pub mod feeds;
pub mod grafana;
pub mod snapshot;
