//! The dispute engine ([`resolvd_engine`]) as the node runs it: gossip
//! origins are libp2p's (message id and propagation source, or the peer of a
//! direct message), and validation
//! verdicts become gossipsub's `MessageAcceptance`.

pub use resolvd_engine::*;

use libp2p::{
    gossipsub::{MessageAcceptance, MessageId},
    PeerId,
};

/// Where a gossip or direct message came from (to report its validation
/// result).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// gossipsub message id; `None` for a message sent directly
    /// ([`crate::p2p::DIRECT_PROTOCOL`]), whose verdict scores its sender
    /// through the application score instead.
    pub id: Option<MessageId>,
    /// The peer that propagated it.
    pub peer: PeerId,
}

impl MessageOrigin for Origin {
    type Peer = PeerId;

    fn peer(&self) -> &PeerId {
        &self.peer
    }
}

/// The engine with libp2p origins.
pub type Engine = resolvd_engine::Engine<Origin>;
/// Its actions.
pub type Action = resolvd_engine::Action<Origin>;

/// gossipsub's name for a validation verdict.
pub fn acceptance(v: Validation) -> MessageAcceptance {
    match v {
        Validation::Accept => MessageAcceptance::Accept,
        Validation::Ignore => MessageAcceptance::Ignore,
        Validation::Reject => MessageAcceptance::Reject,
    }
}
