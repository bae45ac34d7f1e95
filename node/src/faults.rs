//! Test-only faults (a node.toml `[fault]` section): the one place of the
//! node that knows them. The node calls four hooks, at the points a faulty
//! node departs from an honest one:
//!
//! - [`Faults::before_action`]: before it performs an engine action
//!   (`byzantine = lazy` skips the replay and later copies a verified
//!   partial; `replay_delay_ms` delays the replay);
//! - [`Faults::before_sign`]: before it signs (`withhold`, `flip`);
//! - [`Faults::after_signed`]: after its signature is persisted, before the
//!   engine gossips it (`crash_after_persist` aborts; `equivocate` signs the
//!   opposite outcome too, bypassing slashing protection);
//! - [`Faults::on_tick`]: on every tick (`forge_commits`: a stakeless node
//!   has no replay or signature to hook, only time).
//!
//! With the cargo feature `fault-injection` off (an operator's build, which
//! refuses a `[fault]` section) [`Faults`] has no fields and every hook does
//! nothing.

use crate::{
    config::FaultConfig,
    dispute::{Action, Engine},
    p2p::Gossip,
};
use alloy_primitives::B256;
use resolvd_consensus::SecretKey;
use resolvd_proto::{wire::SignedVerdict, VerdictCommitment, VerdictDomain};
use std::time::Duration;

/// What the node does with an engine action ([`Faults::before_action`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Perform {
    /// Perform it; a replay starts after this delay.
    After(Duration),
    /// Drop it.
    #[cfg_attr(not(feature = "fault-injection"), allow(dead_code))]
    Skip,
}

#[cfg(not(feature = "fault-injection"))]
pub(crate) use off::Faults;
#[cfg(feature = "fault-injection")]
pub(crate) use on::Faults;

#[cfg(not(feature = "fault-injection"))]
mod off {
    use super::*;

    /// No faults: an operator's build.
    #[derive(Debug)]
    pub(crate) struct Faults;

    impl Faults {
        pub(crate) fn new(_cfg: &FaultConfig, _secret: Option<&SecretKey>) -> Self {
            Self
        }

        pub(crate) fn before_action(&mut self, _action: &Action, _engine: &mut Engine) -> Perform {
            Perform::After(Duration::ZERO)
        }

        pub(crate) fn before_sign(
            &mut self,
            _deal_id: B256,
            _commitment: &mut VerdictCommitment,
        ) -> bool {
            true
        }

        pub(crate) fn after_signed(
            &mut self,
            _domain: &VerdictDomain,
            _partial: &SignedVerdict,
        ) -> Option<SignedVerdict> {
            None
        }

        pub(crate) fn on_tick(&mut self, _engine: &Engine) -> Vec<Gossip> {
            Vec::new()
        }
    }
}

#[cfg(feature = "fault-injection")]
mod on {
    use super::*;
    use crate::config::Byzantine;
    use resolvd_proto::{wire::PartialCommit, ReexecVerdict};
    use std::collections::HashSet;
    use tracing::{error, warn};

    /// `byzantine = forge_commits`: distinct forged commitments per member
    /// and deal (one more than a signer's slots held before commitments were
    /// signed).
    const FORGED_PER_SIGNER: u8 = 5;

    /// The faults of a node.toml `[fault]` section and their state.
    #[derive(Debug)]
    pub(crate) struct Faults {
        byzantine: Option<Byzantine>,
        /// `byzantine = equivocate`: the BLS key, to sign past protection.
        raw_key: Option<SecretKey>,
        crash_armed: bool,
        /// `byzantine = lazy`: deals waiting for a verified partial to copy.
        lazy: HashSet<B256>,
        /// `replay_delay_ms`.
        replay_delay: Duration,
        /// `byzantine = forge_commits`: deals forged for already.
        forged: HashSet<B256>,
    }

    impl Faults {
        pub(crate) fn new(cfg: &FaultConfig, secret: Option<&SecretKey>) -> Self {
            Self {
                byzantine: cfg.byzantine,
                raw_key: match cfg.byzantine {
                    Some(Byzantine::Equivocate) => secret.cloned(),
                    _ => None,
                },
                crash_armed: cfg.crash_after_persist,
                lazy: HashSet::new(),
                replay_delay: Duration::from_millis(cfg.replay_delay_ms),
                forged: HashSet::new(),
            }
        }

        pub(crate) fn before_action(&mut self, action: &Action, engine: &mut Engine) -> Perform {
            match action {
                Action::Replay(request) if self.byzantine == Some(Byzantine::Lazy) => {
                    let deal = request.deal_id;
                    warn!(target: "fault", %deal, "fault.byzantine = lazy: not replaying; copying the first verified partial");
                    self.lazy.insert(deal);
                    return Perform::Skip;
                }
                Action::PersistPartial(p) if self.lazy.remove(&p.commitment.deal_id) => {
                    warn!(target: "fault", deal = %p.commitment.deal_id, copied = p.signer_index, "fault.byzantine = lazy: signing a copied commitment");
                    engine.copy_partial(p);
                }
                _ => {}
            }
            Perform::After(self.replay_delay)
        }

        pub(crate) fn before_sign(
            &mut self,
            deal: B256,
            commitment: &mut VerdictCommitment,
        ) -> bool {
            match self.byzantine {
                Some(Byzantine::Withhold) => {
                    warn!(target: "fault", %deal, "fault.byzantine = withhold: not signing");
                    return false;
                }
                Some(Byzantine::Flip) => {
                    warn!(target: "fault", %deal, "fault.byzantine = flip: signing the opposite outcome");
                    commitment.outcome = flip(commitment.outcome);
                }
                _ => {}
            }
            true
        }

        pub(crate) fn after_signed(
            &mut self,
            domain: &VerdictDomain,
            partial: &SignedVerdict,
        ) -> Option<SignedVerdict> {
            let deal = partial.commitment.deal_id;
            if self.crash_armed {
                error!(target: "fault", %deal, "fault.crash_after_persist: aborting before gossip");
                std::process::abort();
            }
            let raw = self.raw_key.as_ref()?;
            let mut other = partial.commitment;
            other.outcome = flip(other.outcome);
            let signature = raw.sign(&other.eip712_digest(domain)).compress();
            warn!(target: "fault", %deal, "fault.byzantine = equivocate: signed the opposite outcome too");
            Some(SignedVerdict {
                commitment: other,
                epoch: partial.epoch,
                signer_index: partial.signer_index,
                signature,
            })
        }

        /// `byzantine = forge_commits`: for every open dispute, commitments in
        /// every member's name, signed with a key that is not theirs
        /// (well-formed, so only the signature check catches them).
        pub(crate) fn on_tick(&mut self, engine: &Engine) -> Vec<Gossip> {
            let mut out = Vec::new();
            if self.byzantine != Some(Byzantine::ForgeCommits) {
                return out;
            }
            let forger = SecretKey::from_seed(&[0x5a; 32]).expect("32-byte seed");
            for (deal_id, epoch, members) in engine.forgeable() {
                if !self.forged.insert(deal_id) {
                    continue;
                }
                warn!(target: "fault", deal = %deal_id, members = members.len(), "fault.byzantine = forge_commits: forging commitments for every member");
                for index in members {
                    for k in 0..FORGED_PER_SIGNER {
                        let commit = alloy_primitives::keccak256(
                            [deal_id.as_slice(), &index.to_be_bytes(), &[k]].concat(),
                        );
                        let message = PartialCommit::message(&deal_id, epoch, index, &commit);
                        let signature = forger.sign_commit(&message).compress();
                        out.push(Gossip::Commit(PartialCommit {
                            deal_id,
                            epoch,
                            signer_index: index,
                            commit,
                            signature,
                        }));
                    }
                }
            }
            out
        }
    }

    fn flip(outcome: ReexecVerdict) -> ReexecVerdict {
        match outcome {
            ReexecVerdict::Reproduced => ReexecVerdict::Failed,
            ReexecVerdict::Failed => ReexecVerdict::Reproduced,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Byzantine;
    use alloy_primitives::Address;
    use resolvd_proto::ReexecVerdict;

    fn commitment() -> VerdictCommitment {
        VerdictCommitment {
            deal_id: B256::repeat_byte(1),
            spec_hash: B256::repeat_byte(2),
            delivery_hash: B256::repeat_byte(3),
            prestate_anchor_hash: B256::repeat_byte(4),
            prestate_root: B256::repeat_byte(5),
            backend_id: B256::repeat_byte(6),
            backend_version_hash: B256::repeat_byte(7),
            outcome: ReexecVerdict::Reproduced,
            result_hash: B256::repeat_byte(8),
            trace_hash: B256::repeat_byte(9),
        }
    }

    fn domain() -> VerdictDomain {
        VerdictDomain {
            name: "resolvd".into(),
            version: "1".into(),
            chain_id: 31337,
            verifying_contract: Address::repeat_byte(0xee),
        }
    }

    fn signed(key: &SecretKey, c: VerdictCommitment) -> SignedVerdict {
        let signature = key.sign(&c.eip712_digest(&domain())).compress();
        SignedVerdict { commitment: c, epoch: 3, signer_index: 2, signature }
    }

    fn faults(byzantine: Option<Byzantine>, key: &SecretKey) -> Faults {
        Faults::new(&FaultConfig { byzantine, ..Default::default() }, Some(key))
    }

    /// Without a `[fault]` section no hook changes what the node does, in
    /// either build.
    #[test]
    fn no_fault_changes_nothing() {
        let key = SecretKey::from_seed(&[7; 32]).unwrap();
        let mut f = faults(None, &key);
        let mut c = commitment();
        assert!(f.before_sign(c.deal_id, &mut c));
        assert_eq!(c, commitment());
        assert_eq!(f.after_signed(&domain(), &signed(&key, c)), None);
    }

    /// The operator's build: even a `[fault]` section (which its config check
    /// refuses first) reaches no hook.
    #[cfg(not(feature = "fault-injection"))]
    #[test]
    fn an_operator_build_has_no_faults() {
        let key = SecretKey::from_seed(&[7; 32]).unwrap();
        for b in [Byzantine::Withhold, Byzantine::Flip, Byzantine::Equivocate] {
            let mut f = faults(Some(b), &key);
            let mut c = commitment();
            assert!(f.before_sign(c.deal_id, &mut c));
            assert_eq!(c, commitment());
            assert_eq!(f.after_signed(&domain(), &signed(&key, c)), None);
        }
        assert_eq!(std::mem::size_of::<Faults>(), 0);
    }

    #[cfg(feature = "fault-injection")]
    #[test]
    fn withhold_and_flip_act_before_signing() {
        let key = SecretKey::from_seed(&[7; 32]).unwrap();
        let mut c = commitment();
        assert!(!faults(Some(Byzantine::Withhold), &key).before_sign(c.deal_id, &mut c));
        assert!(faults(Some(Byzantine::Flip), &key).before_sign(c.deal_id, &mut c));
        assert_eq!(c.outcome, ReexecVerdict::Failed);
        assert_eq!(c, VerdictCommitment { outcome: ReexecVerdict::Failed, ..commitment() });
    }

    #[cfg(feature = "fault-injection")]
    #[test]
    fn equivocate_signs_the_opposite_outcome_with_the_same_key() {
        let key = SecretKey::from_seed(&[7; 32]).unwrap();
        let own = signed(&key, commitment());
        let other = faults(Some(Byzantine::Equivocate), &key)
            .after_signed(&domain(), &own)
            .expect("a second partial");
        assert_eq!(
            other.commitment,
            VerdictCommitment { outcome: ReexecVerdict::Failed, ..own.commitment }
        );
        assert_eq!((other.epoch, other.signer_index), (own.epoch, own.signer_index));
        let signature = resolvd_consensus::Signature::from_compressed(&other.signature).unwrap();
        signature.verify(&key.public_key(), &other.commitment.eip712_digest(&domain())).unwrap();
        // Other byzantine behaviours sign once.
        assert_eq!(faults(Some(Byzantine::Flip), &key).after_signed(&domain(), &own), None);
    }
}
