//! The simulator's errors: bad parameters. A run that forms no certificate
//! is a result, not an error.

/// What is wrong with a run's parameters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A fault specification that does not parse or does not fit the committee.
    #[error("faults: {0}")]
    Faults(String),
    /// A latency or publish specification that does not parse.
    #[error("network: {0}")]
    Latency(String),
    /// Parameters no run can have.
    #[error("invalid run: {0}")]
    Invalid(String),
}

/// The simulator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
