//! Doppelgänger detection: a verified partial of this node's own key, from a
//! peer, that this node did not make means the key runs elsewhere; the node
//! stops signing ([`Engine::doppelganger`]). At start, signing can be held
//! until a quiet period passed ([`Engine::hold_signing_until`]).

use super::*;
use resolvd_proto::wire::SignedVerdict;
use tracing::{error, info};

/// What detection found, and the signatures held at start.
pub(crate) struct Doppelganger<O: MessageOrigin> {
    /// A partial of this node's key it did not make: (deal, epoch, signer).
    pub(crate) seen: Option<(B256, u64, u32)>,
    /// No [`Action::Sign`] leaves the engine before this instant.
    pub(crate) hold_until: Option<Instant>,
    /// The signatures asked for meanwhile.
    pub(crate) held: Vec<Action<O>>,
}

impl<O: MessageOrigin> Default for Doppelganger<O> {
    fn default() -> Self {
        Self { seen: None, hold_until: None, held: Vec::new() }
    }
}

impl<O: MessageOrigin> Engine<O> {
    /// Holds every signature until `until` (the first tick at or after it
    /// releases them, unless a partial of this node's key made elsewhere was
    /// seen meanwhile: then they are never made).
    pub fn hold_signing_until(&mut self, until: Instant) {
        self.doppelganger.hold_until = Some(until);
    }

    /// Whether signatures are being held ([`Self::hold_signing_until`]).
    pub fn signing_held(&self) -> bool {
        self.doppelganger.hold_until.is_some()
    }

    /// The first tick at or after the hold: the held signatures are made,
    /// unless the key was seen elsewhere.
    pub(crate) fn release_held_signatures(&mut self, now: Instant) {
        if self.doppelganger.hold_until.is_none_or(|t| now < t) {
            return;
        }
        // A peer's partial under this node's key still waiting for its batch
        // may be the other instance: decide after it is verified.
        let unverified_own = self
            .queue
            .deferred
            .values()
            .any(|q| self.own_key(q.partial.epoch, q.partial.signer_index));
        if unverified_own {
            return;
        }
        self.doppelganger.hold_until = None;
        let held = std::mem::take(&mut self.doppelganger.held);
        if self.doppelganger.seen.is_some() {
            return;
        }
        info!(target: "node", held = held.len(), "doppelganger wait over: no other instance of this key seen; signing");
        for action in held {
            self.push(action);
        }
    }

    /// Whether `signer` is this node's index in `epoch`, with detection on
    /// (a committee scan: only when detection is on).
    pub(crate) fn own_key(&self, epoch: u64, signer: u32) -> bool {
        self.cfg.detect_doppelganger && self.my_index(epoch) == Some(signer)
    }

    /// A partial of this node's key, verified and from a peer: unless it is
    /// what this data dir signed, the key runs elsewhere.
    pub(crate) fn check_doppelganger(&mut self, p: &SignedVerdict) {
        let Some(d) = self.disputes.get(&p.commitment.deal_id) else { return };
        if d.own.as_ref().is_none_or(|o| o.commitment != p.commitment) {
            let signer = p.signer_index;
            error!(target: "pipeline", deal = %p.commitment.deal_id, signer, "DOPPELGANGER: a partial signed by this node's key that this node did not make: the key runs elsewhere; refusing to sign");
            self.doppelganger.seen.get_or_insert((p.commitment.deal_id, p.epoch, signer));
        }
    }
}
