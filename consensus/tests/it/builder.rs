//! Certificate builder and conflict detector scenarios, driven without a network.

use crate::vectors::{commitment, committee, domain, secret};
use alloy_primitives::{B256, U256};
use resolvd_consensus::{
    protection::{MemoryStore, ProtectedSigner},
    Attestation, BuilderEvent, CertificateBuilder, ConflictDetector, Error, Queued,
    QuorumCertificate, Signature, DEFAULT_THRESHOLD_BPS,
};
use resolvd_proto::{
    wire::{SignedVerdict, WireMessage},
    ReexecVerdict, VerdictCommitment,
};

const SEED: [u8; 32] = [3; 32];

fn partial(i: u32, c: &VerdictCommitment) -> SignedVerdict {
    let digest = c.eip712_digest(&domain());
    SignedVerdict {
        commitment: *c,
        epoch: 1,
        signer_index: i,
        signature: secret(i as usize).sign(&digest).compress(),
    }
}

fn certificates(events: &[BuilderEvent]) -> Vec<QuorumCertificate> {
    events
        .iter()
        .filter_map(|e| match e {
            BuilderEvent::Certificate(qc) => Some((**qc).clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn certificate_once_threshold_is_reached() {
    // Stakes 10..40: total 100, threshold 6667 bps needs 66.67.
    let c = committee(4, &[10, 20, 30, 40], DEFAULT_THRESHOLD_BPS);
    let mut b = CertificateBuilder::new(c.clone(), domain());
    let cm = commitment(7, ReexecVerdict::Reproduced);
    let digest = cm.eip712_digest(&domain());

    // 40 + 20 = 60: below.
    assert_eq!(b.on_partial(&partial(3, &cm)).unwrap(), Queued::New);
    assert_eq!(b.on_partial(&partial(1, &cm)).unwrap(), Queued::New);
    assert_eq!(b.on_partial(&partial(1, &cm)).unwrap(), Queued::Duplicate);
    assert!(certificates(&b.process(&SEED)).is_empty());
    assert_eq!(b.signed_stake(&digest), U256::from(60));
    assert_eq!(b.on_partial(&partial(3, &cm)).unwrap(), Queued::Duplicate);

    // + 10 = 70: certificate with non-signer 2.
    b.on_partial(&partial(0, &cm)).unwrap();
    let qcs = certificates(&b.process(&SEED));
    assert_eq!(qcs.len(), 1);
    assert_eq!(qcs[0].non_signers, vec![2]);
    assert_eq!(qcs[0].verify(&c, &domain()).unwrap(), U256::from(70));

    // A late partial does not produce a second certificate.
    b.on_partial(&partial(2, &cm)).unwrap();
    assert!(certificates(&b.process(&SEED)).is_empty());

    // The certificate survives the wire.
    let wire = qcs[0].to_wire();
    let back = resolvd_proto::wire::QuorumCertificate::decode_wire(&wire.encode_wire()).unwrap();
    assert_eq!(QuorumCertificate::from_wire(&back).unwrap(), qcs[0]);
}

#[test]
fn uncounted_partials_are_verified_but_join_only_when_counted() {
    let c = committee(4, &[1], DEFAULT_THRESHOLD_BPS);
    let mut b = CertificateBuilder::new(c.clone(), domain());
    let cm = commitment(9, ReexecVerdict::Reproduced);
    let digest = cm.eip712_digest(&domain());
    for i in 0..4 {
        assert_eq!(b.on_partial_uncounted(&partial(i, &cm)).unwrap(), Queued::New);
    }
    let mut bad = partial(3, &commitment(9, ReexecVerdict::Failed));
    bad.signature = partial(2, &bad.commitment).signature;
    b.on_partial_uncounted(&bad).unwrap();
    let events = b.process(&SEED);
    // Verified (4) and invalid (1) are reported; nothing counts, no certificate.
    let verified = events.iter().filter(|e| matches!(e, BuilderEvent::Verified { .. })).count();
    assert_eq!(verified, 4);
    assert!(events.iter().any(|e| matches!(e, BuilderEvent::Invalid { signer: 3, .. })));
    assert!(certificates(&events).is_empty());
    assert_eq!(b.signed_stake(&digest), U256::ZERO);
    // Counted one by one: the third reaches 3 of 4 and yields the certificate.
    assert!(b.count_verified(&partial(0, &cm)).is_none());
    assert!(b.count_verified(&partial(0, &cm)).is_none(), "counting twice adds nothing");
    assert!(b.count_verified(&partial(2, &cm)).is_none());
    assert_eq!(b.signed_stake(&digest), U256::from(2));
    let qc = b.count_verified(&partial(3, &cm)).expect("threshold reached");
    assert_eq!(qc.non_signers, vec![1]);
    assert_eq!(qc.verify(&c, &domain()).unwrap(), U256::from(3));
    assert_eq!(b.signer_count(&digest), 3);
    assert!(b.count_verified(&partial(1, &cm)).is_none(), "emitted once");
    // The late signer is in the best certificate now: no non-signers.
    let best = b.best_certificate(&digest).expect("above the threshold");
    assert!(best.non_signers.is_empty());
    assert_eq!(best.verify(&c, &domain()).unwrap(), U256::from(4));
    // A non-member is ignored.
    let mut foreign = partial(0, &cm);
    foreign.signer_index = 99;
    assert!(b.count_verified(&foreign).is_none());
}

#[test]
fn invalid_partials_are_reported_and_not_counted() {
    let c = committee(5, &[1], DEFAULT_THRESHOLD_BPS);
    let mut b = CertificateBuilder::new(c, domain());
    let cm = commitment(8, ReexecVerdict::Failed);
    for i in 0..5 {
        let mut p = partial(i, &cm);
        if i == 2 {
            // Signer 2's slot carries signer 4's signature: valid point, wrong key.
            p.signature = partial(4, &cm).signature;
        }
        b.on_partial(&p).unwrap();
    }
    let events = b.process(&SEED);
    let invalid: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            BuilderEvent::Invalid { signer, .. } => Some(*signer),
            _ => None,
        })
        .collect();
    assert_eq!(invalid, vec![2]);
    // 4 of 5 valid = 80 % >= 66.67 %: certificate without signer 2.
    assert_eq!(certificates(&events)[0].non_signers, vec![2]);
}

#[test]
fn single_partials_over_distinct_digests_use_multi_verify() {
    let c = committee(4, &[1], DEFAULT_THRESHOLD_BPS);
    let mut b = CertificateBuilder::new(c, domain());
    for i in 0..4u32 {
        let mut p = partial(i, &commitment(10 + i as u8, ReexecVerdict::Reproduced));
        if i == 1 {
            p.signature = secret(1).sign(&B256::ZERO).compress();
        }
        b.on_partial(&p).unwrap();
    }
    let events = b.process(&SEED);
    let verified = events.iter().filter(|e| matches!(e, BuilderEvent::Verified { .. })).count();
    let invalid: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            BuilderEvent::Invalid { signer, .. } => Some(*signer),
            _ => None,
        })
        .collect();
    assert_eq!((verified, invalid), (3, vec![1]));
}

#[test]
fn foreign_and_malformed_partials_are_rejected() {
    let c = committee(3, &[1], DEFAULT_THRESHOLD_BPS);
    let mut b = CertificateBuilder::new(c, domain());
    let cm = commitment(9, ReexecVerdict::Reproduced);
    let mut p = partial(0, &cm);
    p.epoch = 2;
    assert!(matches!(b.on_partial(&p), Err(Error::WrongEpoch { .. })));
    let mut p = partial(0, &cm);
    p.signer_index = 3;
    assert!(matches!(b.on_partial(&p), Err(Error::IndexOutOfRange { .. })));
    let mut p = partial(0, &cm);
    p.signature[5] ^= 0xff;
    assert!(b.on_partial(&p).is_err());
    assert_eq!(b.pending(), 0);
}

#[test]
fn equivocation_is_detected_once_and_dissent_is_not() {
    let c = committee(5, &[1], DEFAULT_THRESHOLD_BPS);
    let d = domain();
    let mut det = ConflictDetector::new(d.clone());
    det.add_committee(c.clone());
    let yes = commitment(0x42, ReexecVerdict::Reproduced);
    let no = commitment(0x42, ReexecVerdict::Failed);
    let single = |i: u32, cm: &VerdictCommitment| {
        let p = partial(i, cm);
        Attestation::single(&p, Signature::from_compressed(&p.signature).unwrap())
    };
    // Dissent: 0..4 sign yes, 4 signs no. Signer 4 signed no only: not evidence.
    let sigs: Vec<Signature> = (0..4).map(|i| secret(i).sign(&yes.eip712_digest(&d))).collect();
    let qc = QuorumCertificate {
        commitment: yes,
        epoch: 1,
        non_signers: vec![4],
        signature: Signature::aggregate(&sigs).unwrap(),
    };
    assert!(det.on_attestation(qc.attestation(&c).unwrap()).unwrap().is_empty());
    assert!(det.on_attestation(single(4, &no)).unwrap().is_empty());

    // Signer 1 also signs no: it signed both.
    let ev = det.on_attestation(single(1, &no)).unwrap();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].equivocators, vec![secret(1).public_key()]);
    // Evidence is what anyone re-verifies before slashing.
    let committees = std::collections::BTreeMap::from([(1u64, c.clone())]);
    resolvd_consensus::ConflictEvidence::verify(
        ev[0].first.clone(),
        ev[0].second.clone(),
        &committees,
        &d,
    )
    .unwrap();
    // Reported once per deal.
    assert!(det.on_attestation(single(1, &no)).unwrap().is_empty());
}

#[test]
fn forged_evidence_is_refused() {
    let c = committee(3, &[1], DEFAULT_THRESHOLD_BPS);
    let d = domain();
    let committees = std::collections::BTreeMap::from([(1u64, c)]);
    let yes = commitment(1, ReexecVerdict::Reproduced);
    let no = commitment(1, ReexecVerdict::Failed);
    let att = |i: usize, cm: &VerdictCommitment, signer: usize| Attestation {
        commitment: *cm,
        epoch: 1,
        signers: vec![i as u32],
        signature: secret(signer).sign(&cm.eip712_digest(&d)),
    };
    // Signer 0 never signed "no": a signature by 2 claimed as 0's is refused.
    let err = resolvd_consensus::ConflictEvidence::verify(
        att(0, &yes, 0),
        att(0, &no, 2),
        &committees,
        &d,
    )
    .unwrap_err();
    assert_eq!(err, Error::VerifyFailed);
    let err = resolvd_consensus::ConflictEvidence::verify(
        att(0, &yes, 0),
        att(1, &no, 1),
        &committees,
        &d,
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotAConflict { .. }));
}

#[test]
fn protected_signer_output_feeds_the_builder() {
    let c = committee(3, &[1], DEFAULT_THRESHOLD_BPS);
    let d = domain();
    let mut b = CertificateBuilder::new(c, d.clone());
    let cm = commitment(5, ReexecVerdict::Reproduced);
    for i in 0..3usize {
        let mut signer = ProtectedSigner::new(secret(i), MemoryStore::default());
        let sig = signer.sign(&d, &cm).unwrap();
        assert!(signer.sign(&d, &commitment(5, ReexecVerdict::Failed)).is_err());
        b.on_partial(&SignedVerdict {
            commitment: cm,
            epoch: 1,
            signer_index: i as u32,
            signature: sig.compress(),
        })
        .unwrap();
    }
    assert_eq!(certificates(&b.process(&SEED)).len(), 1);
}

/// An aggregate of `signers`' partials of `c`, built by a builder that
/// verified them (as a slice's collector does).
fn slice_aggregate(
    c: &resolvd_consensus::Committee,
    cm: &VerdictCommitment,
    signers: &[u32],
) -> Attestation {
    let mut b = CertificateBuilder::new(c.clone(), domain());
    for &i in signers {
        b.on_partial(&partial(i, cm)).unwrap();
    }
    b.process(&SEED);
    b.aggregate_of(&cm.eip712_digest(&domain()), signers).expect("verified partials")
}

#[test]
fn aggregates_of_slices_combine_with_partials_into_one_certificate() {
    let c = committee(9, &[1], DEFAULT_THRESHOLD_BPS);
    let cm = commitment(11, ReexecVerdict::Reproduced);
    let digest = cm.eip712_digest(&domain());
    let mut b = CertificateBuilder::new(c.clone(), domain());
    // Two slices' aggregates (3 signers each) and one partial: 7 of 9.
    let first = slice_aggregate(&c, &cm, &[0, 1, 2]);
    let second = slice_aggregate(&c, &cm, &[3, 4, 5]);
    assert_eq!(first.signers, vec![0, 1, 2]);
    first.verify(&c, &domain()).unwrap();
    assert_eq!(b.on_aggregate(&first).unwrap(), Queued::New);
    assert_eq!(b.on_aggregate(&first).unwrap(), Queued::Duplicate, "the same one queued");
    assert!(!b.could_certify(&digest));
    b.on_aggregate(&second).unwrap();
    b.on_partial(&partial(6, &cm)).unwrap();
    assert!(b.could_certify(&digest));
    let events = b.process(&SEED);
    let verified =
        events.iter().filter(|e| matches!(e, BuilderEvent::AggregateVerified(_))).count();
    assert_eq!(verified, 2);
    let qcs = certificates(&events);
    assert_eq!(qcs.len(), 1);
    assert_eq!(qcs[0].non_signers, vec![7, 8]);
    qcs[0].verify(&c, &domain()).unwrap();
    // Covered signers: a subset of a verified aggregate is a duplicate.
    let subset = slice_aggregate(&c, &cm, &[1, 2]);
    assert_eq!(b.on_aggregate(&subset).unwrap(), Queued::Duplicate);
    assert_eq!(b.signer_count(&digest), 7);
    // So is the partial of a signer an aggregate covers (not verified again).
    assert_eq!(b.on_partial(&partial(4, &cm)).unwrap(), Queued::Duplicate);
    assert_eq!(b.on_partial(&partial(7, &cm)).unwrap(), Queued::New);
}

#[test]
fn overlapping_and_invalid_aggregates_never_make_an_invalid_certificate() {
    let c = committee(9, &[1], DEFAULT_THRESHOLD_BPS);
    let cm = commitment(12, ReexecVerdict::Reproduced);
    let digest = cm.eip712_digest(&domain());
    let mut b = CertificateBuilder::new(c.clone(), domain());
    // A garbage aggregate claiming six signers: one pairing, rejected.
    let mut garbage = slice_aggregate(&c, &cm, &[0, 1, 2, 3, 4, 5]);
    garbage.signature = slice_aggregate(&c, &cm, &[0, 1, 2, 3, 4]).signature;
    b.on_aggregate(&garbage).unwrap();
    // Overlapping genuine ones: {0..4} is taken first (the larger); {3..6}
    // shares 3 and 4 without containing it: not verified, not taken.
    b.on_aggregate(&slice_aggregate(&c, &cm, &[0, 1, 2, 3, 4])).unwrap();
    let overlapping = slice_aggregate(&c, &cm, &[3, 4, 5, 6]);
    b.on_aggregate(&overlapping).unwrap();
    let events = b.process(&SEED);
    assert!(events
        .iter()
        .any(|e| matches!(e, BuilderEvent::AggregateInvalid(a) if a.signers.len() == 6)));
    assert!(events
        .iter()
        .any(|e| matches!(e, BuilderEvent::AggregateCovered(a) if a.signers == [3, 4, 5, 6])));
    assert_eq!(b.signer_count(&digest), 5);
    assert!(certificates(&events).is_empty());
    // Sent again, it costs no pairing: a duplicate at once.
    assert_eq!(b.on_aggregate(&overlapping).unwrap(), Queued::Duplicate);
    // A superset of the taken one replaces it; the partials of 6 and 7 complete it.
    b.on_aggregate(&slice_aggregate(&c, &cm, &[0, 1, 2, 3, 4, 5])).unwrap();
    b.on_partial(&partial(6, &cm)).unwrap();
    b.on_partial(&partial(7, &cm)).unwrap();
    let qcs = certificates(&b.process(&SEED));
    assert_eq!(qcs.len(), 1);
    assert_eq!(qcs[0].non_signers, vec![8]);
    qcs[0].verify(&c, &domain()).unwrap();
    // Partials inside a taken aggregate are duplicates, and stay covered.
    assert_eq!(b.on_partial(&partial(1, &cm)).unwrap(), Queued::Duplicate);
    assert_eq!(b.signer_count(&digest), 8);
}

#[test]
fn aggregates_are_checked_before_they_are_queued() {
    let c = committee(4, &[1], DEFAULT_THRESHOLD_BPS);
    let cm = commitment(13, ReexecVerdict::Reproduced);
    let mut b = CertificateBuilder::new(c.clone(), domain());
    let mut a = slice_aggregate(&c, &cm, &[0, 1]);
    a.signers = vec![0, 9];
    assert!(b.on_aggregate(&a).is_err(), "a non-member");
    a.signers = vec![];
    assert!(matches!(b.on_aggregate(&a), Err(Error::EmptyAggregate)));
    a.signers = vec![0, 1];
    a.epoch = 2;
    assert!(matches!(b.on_aggregate(&a), Err(Error::WrongEpoch { .. })));
    assert_eq!(b.pending(), 0);
}
