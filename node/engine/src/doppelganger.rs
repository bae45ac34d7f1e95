//! Doppelgänger detection: a verified partial of this node's own key, from a
//! peer, that this node did not make means the key runs elsewhere; the node
//! stops signing ([`Engine::doppelganger`]). The shell holds signing at start
//! until a quiet period passed.

use super::*;
use resolvd_proto::wire::SignedVerdict;
use tracing::error;

impl<O: MessageOrigin> Engine<O> {
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
            self.doppelganger.get_or_insert((p.commitment.deal_id, p.epoch, signer));
        }
    }
}
