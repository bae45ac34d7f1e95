//! Certificate builder and conflict detector scenarios.
