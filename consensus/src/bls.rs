//! BLS12-381 "minimal-pubkey-size" signatures over blst: public keys in G1
//! (48 bytes compressed), signatures in G2 (96 bytes compressed), ciphersuite
//! `BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_` with proof of possession.
//!
//! Every point decoded from bytes is checked for being on the curve, in the
//! prime-order subgroup, and not the point at infinity. Points also convert to
//! and from the EIP-2537 precompile encodings the contracts take: G1 as
//! `pad16(x) ‖ pad16(y)` (128 bytes), G2 as `pad16(x.c0) ‖ pad16(x.c1) ‖
//! pad16(y.c0) ‖ pad16(y.c1)` (256 bytes). blst serialises G2 as
//! `x.c1 ‖ x.c0 ‖ y.c1 ‖ y.c0`, so the Fp2 halves are swapped on the way.

use crate::{Error, Result};
use alloy_primitives::{Address, B256, U256};
use blst::{min_pk, BLST_ERROR};
use std::fmt;
use zeroize::Zeroizing;

/// Domain separation tag of verdict signatures.
pub const SIGNATURE_DST: &[u8] = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
/// Domain separation tag of proofs of possession.
pub const POP_DST: &[u8] = b"BLS_POP_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
/// Domain separation tag of commit-reveal commitments (`PartialCommit`
/// signatures). Distinct from [`SIGNATURE_DST`] on purpose: hash-to-curve
/// under another DST is an independent random oracle, so a commitment
/// signature never verifies as a verdict signature (nor as a proof of
/// possession) and cannot be presented to an escrow, aggregated into a
/// certificate or used as equivocation evidence. That is also why it needs
/// no slashing protection: whatever a node commits to, it has signed no verdict.
pub const COMMIT_DST: &[u8] = b"RESOLVD_COMMIT_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
/// DST of member records (a member's peer id and addresses, see
/// `resolvd_proto::wire::MemberRecord`). Distinct from [`SIGNATURE_DST`] and
/// [`COMMIT_DST`] for the same reason: a record signature is never a verdict
/// or a commitment signature, so publishing one cannot be slashed.
pub const RECORD_DST: &[u8] = b"RESOLVD_RECORD_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";

/// Compressed G1 public key length.
pub const PUBLIC_KEY_LEN: usize = 48;
/// Compressed G2 signature length.
pub const SIGNATURE_LEN: usize = 96;
/// EIP-2537 G1 point length.
pub const G1_EIP2537_LEN: usize = 128;
/// EIP-2537 G2 point length.
pub const G2_EIP2537_LEN: usize = 256;

fn encoding(what: &'static str, e: BLST_ERROR) -> Error {
    match e {
        BLST_ERROR::BLST_POINT_NOT_IN_GROUP => Error::NotInSubgroup { what },
        BLST_ERROR::BLST_PK_IS_INFINITY => Error::Infinity { what },
        other => Error::InvalidEncoding { what, reason: format!("{other:?}") },
    }
}

fn check_len(what: &'static str, bytes: &[u8], expected: usize) -> Result<()> {
    if bytes.len() == expected {
        Ok(())
    } else {
        Err(Error::InvalidEncoding {
            what,
            reason: format!("{} bytes, expected {expected}", bytes.len()),
        })
    }
}

/// Copies 48-byte field elements into 64-byte EIP-2537 slots, in the given order.
fn pad_fields<const N: usize>(src: &[u8], order: &[usize]) -> [u8; N] {
    let mut out = [0u8; N];
    for (slot, &field) in order.iter().enumerate() {
        out[slot * 64 + 16..slot * 64 + 64].copy_from_slice(&src[field * 48..field * 48 + 48]);
    }
    out
}

/// Inverse of [`pad_fields`]: rejects non-zero padding.
fn unpad_fields(what: &'static str, src: &[u8], order: &[usize]) -> Result<Vec<u8>> {
    let mut out = vec![0u8; order.len() * 48];
    for (slot, &field) in order.iter().enumerate() {
        let chunk = &src[slot * 64..slot * 64 + 64];
        if chunk[..16].iter().any(|b| *b != 0) {
            return Err(Error::InvalidEncoding { what, reason: "non-zero padding".into() });
        }
        out[field * 48..field * 48 + 48].copy_from_slice(&chunk[16..]);
    }
    Ok(out)
}

/// G1: EIP-2537 slot `i` holds blst field `G1_ORDER[i]` (x, y).
const G1_ORDER: [usize; 2] = [0, 1];
/// G2: EIP-2537 slots are x.c0, x.c1, y.c0, y.c1; blst holds x.c1, x.c0, y.c1, y.c0.
const G2_ORDER: [usize; 4] = [1, 0, 3, 2];

/// A BLS secret key. Zeroized on drop; its `Debug` never prints the scalar.
#[derive(Clone)]
pub struct SecretKey(min_pk::SecretKey);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl SecretKey {
    /// The EIP-2333 master key of `seed` (at least 32 bytes of entropy).
    pub fn from_seed(seed: &[u8]) -> Result<Self> {
        if seed.len() < 32 {
            return Err(Error::WeakSeed { len: seed.len() });
        }
        min_pk::SecretKey::derive_master_eip2333(seed)
            .map(Self)
            .map_err(|_| Error::WeakSeed { len: seed.len() })
    }

    /// The EIP-2333 child key at `index`.
    pub fn derive_child(&self, index: u32) -> Self {
        Self(self.0.derive_child_eip2333(index))
    }

    /// A key from its 32-byte big-endian scalar, which must be in `[1, r)`.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self> {
        min_pk::SecretKey::from_bytes(bytes).map(Self).map_err(|_| Error::InvalidSecretKey)
    }

    /// The 32-byte big-endian scalar, in a buffer that is zeroized on drop.
    pub fn to_bytes(&self) -> Zeroizing<[u8; 32]> {
        Zeroizing::new(self.0.to_bytes())
    }

    /// The public key.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.0.sk_to_pk())
    }

    /// Signs a 32-byte digest (resolvd signs EIP-712 verdict digests).
    pub fn sign(&self, digest: &B256) -> Signature {
        Signature(self.0.sign(digest.as_slice(), SIGNATURE_DST, &[]))
    }

    /// Signs a commit-reveal commitment message under [`COMMIT_DST`] (never
    /// a verdict signature, see there).
    pub fn sign_commit(&self, message: &B256) -> Signature {
        Signature(self.0.sign(message.as_slice(), COMMIT_DST, &[]))
    }

    /// Signs a member record's message under [`RECORD_DST`].
    pub fn sign_record(&self, message: &B256) -> Signature {
        Signature(self.0.sign(message.as_slice(), RECORD_DST, &[]))
    }

    /// Signs an arbitrary message under an arbitrary DST. resolvd itself only
    /// uses [`Self::sign`], [`Self::sign_commit`] and [`Self::prove_possession`]; this exists for
    /// protocol test vectors (e.g. RFC 9380's, with the secret key 1).
    pub fn sign_with_dst(&self, message: &[u8], dst: &[u8]) -> Signature {
        Signature(self.0.sign(message, dst, &[]))
    }

    /// The unbound proof of possession: a signature over the compressed public
    /// key alone under [`POP_DST`].
    ///
    /// Deprecated for registration: `ResolverRegistry.register` only accepts
    /// [`Self::prove_possession_for`], because an unbound proof can be copied
    /// from the mempool (or another chain) and registered first by anyone,
    /// squatting the key forever. Kept for the key-file format and tests.
    pub fn prove_possession(&self) -> Signature {
        Signature(self.0.sign(&self.public_key().compress(), POP_DST, &[]))
    }

    /// The proof of possession `ResolverRegistry.register` takes: a signature
    /// under [`POP_DST`] over [`PossessionBinding::message`], i.e. the
    /// compressed key bound to the chain, the registry and the operator that
    /// submits it. Nobody else can register the key with it.
    pub fn prove_possession_for(&self, binding: &PossessionBinding) -> Signature {
        Signature(self.0.sign(&binding.message(&self.public_key()), POP_DST, &[]))
    }
}

/// A validated G1 public key (on the curve, in the subgroup, not infinity).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey(pub(crate) min_pk::PublicKey);

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey(0x{})", alloy_primitives::hex::encode(self.compress()))
    }
}

impl PublicKey {
    fn validated(what: &'static str, pk: min_pk::PublicKey) -> Result<Self> {
        pk.validate().map_err(|e| encoding(what, e))?;
        Ok(Self(pk))
    }

    /// Decodes and validates a 48-byte compressed key.
    pub fn from_compressed(bytes: &[u8]) -> Result<Self> {
        check_len("public key", bytes, PUBLIC_KEY_LEN)?;
        let pk = min_pk::PublicKey::uncompress(bytes).map_err(|e| encoding("public key", e))?;
        Self::validated("public key", pk)
    }

    /// Decodes and validates a 128-byte EIP-2537 G1 point.
    pub fn from_eip2537(bytes: &[u8]) -> Result<Self> {
        check_len("G1 point", bytes, G1_EIP2537_LEN)?;
        if bytes.iter().all(|b| *b == 0) {
            return Err(Error::Infinity { what: "G1 point" });
        }
        let raw = unpad_fields("G1 point", bytes, &G1_ORDER)?;
        let pk = min_pk::PublicKey::deserialize(&raw).map_err(|e| encoding("G1 point", e))?;
        Self::validated("G1 point", pk)
    }

    /// The 48-byte compressed encoding.
    pub fn compress(&self) -> [u8; PUBLIC_KEY_LEN] {
        self.0.compress()
    }

    /// The 128-byte EIP-2537 encoding.
    pub fn to_eip2537(&self) -> [u8; G1_EIP2537_LEN] {
        pad_fields(&self.0.serialize(), &G1_ORDER)
    }

    /// Checks an unbound proof of possession (see [`SecretKey::prove_possession`];
    /// deprecated for registration in favour of [`Self::verify_possession_for`]).
    pub fn verify_possession(&self, pop: &Signature) -> Result<()> {
        match pop.0.verify(false, &self.compress(), POP_DST, &[], &self.0, false) {
            BLST_ERROR::BLST_SUCCESS => Ok(()),
            _ => Err(Error::InvalidProofOfPossession),
        }
    }

    /// Checks a proof of possession bound to `binding`, as the registry does.
    pub fn verify_possession_for(
        &self,
        pop: &Signature,
        binding: &PossessionBinding,
    ) -> Result<()> {
        match pop.0.verify(false, &binding.message(self), POP_DST, &[], &self.0, false) {
            BLST_ERROR::BLST_SUCCESS => Ok(()),
            _ => Err(Error::InvalidProofOfPossession),
        }
    }

    /// The sum of `keys`. Keys are validated on decoding and proven by their
    /// PoP at registration, so no rogue-key check is repeated here.
    pub fn aggregate<'a>(keys: impl IntoIterator<Item = &'a PublicKey>) -> Result<PublicKey> {
        let keys: Vec<&min_pk::PublicKey> = keys.into_iter().map(|k| &k.0).collect();
        if keys.is_empty() {
            return Err(Error::EmptyAggregate);
        }
        let agg = min_pk::AggregatePublicKey::aggregate(&keys, false)
            .map_err(|e| encoding("public key", e))?;
        Ok(PublicKey(agg.to_public_key()))
    }
}

/// What a registration's proof of possession is bound to: the chain, the
/// `ResolverRegistry` and the operator address that calls `register`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PossessionBinding {
    /// EIP-155 chain id of the registry's chain.
    pub chain_id: u64,
    /// The registry contract.
    pub registry: Address,
    /// The operator (the `msg.sender` of `register`).
    pub operator: Address,
}

/// Length of [`PossessionBinding::message`].
pub const POSSESSION_MESSAGE_LEN: usize = PUBLIC_KEY_LEN + 32 + 20 + 20;

impl PossessionBinding {
    /// The signed message: `compress(key) ‖ uint256(chainId) ‖ registry ‖
    /// operator` (120 bytes; Solidity `abi.encodePacked(compressG1(key),
    /// block.chainid, address(this), msg.sender)`).
    pub fn message(&self, key: &PublicKey) -> [u8; POSSESSION_MESSAGE_LEN] {
        let mut out = [0u8; POSSESSION_MESSAGE_LEN];
        out[..PUBLIC_KEY_LEN].copy_from_slice(&key.compress());
        out[PUBLIC_KEY_LEN..PUBLIC_KEY_LEN + 32]
            .copy_from_slice(&U256::from(self.chain_id).to_be_bytes::<32>());
        out[PUBLIC_KEY_LEN + 32..PUBLIC_KEY_LEN + 52].copy_from_slice(self.registry.as_slice());
        out[PUBLIC_KEY_LEN + 52..].copy_from_slice(self.operator.as_slice());
        out
    }
}

/// A validated G2 signature (on the curve, in the subgroup, not infinity).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature(pub(crate) min_pk::Signature);

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature(0x{})", alloy_primitives::hex::encode(self.compress()))
    }
}

impl Signature {
    fn validated(what: &'static str, sig: min_pk::Signature) -> Result<Self> {
        sig.validate(true).map_err(|e| encoding(what, e))?;
        Ok(Self(sig))
    }

    /// Decodes and validates a 96-byte compressed signature.
    pub fn from_compressed(bytes: &[u8]) -> Result<Self> {
        check_len("signature", bytes, SIGNATURE_LEN)?;
        let sig = min_pk::Signature::uncompress(bytes).map_err(|e| encoding("signature", e))?;
        Self::validated("signature", sig)
    }

    /// Decodes and validates a 256-byte EIP-2537 G2 point.
    pub fn from_eip2537(bytes: &[u8]) -> Result<Self> {
        check_len("G2 point", bytes, G2_EIP2537_LEN)?;
        if bytes.iter().all(|b| *b == 0) {
            return Err(Error::Infinity { what: "G2 point" });
        }
        let raw = unpad_fields("G2 point", bytes, &G2_ORDER)?;
        let sig = min_pk::Signature::deserialize(&raw).map_err(|e| encoding("G2 point", e))?;
        Self::validated("G2 point", sig)
    }

    /// The 96-byte compressed encoding.
    pub fn compress(&self) -> [u8; SIGNATURE_LEN] {
        self.0.compress()
    }

    /// The 256-byte EIP-2537 encoding.
    pub fn to_eip2537(&self) -> [u8; G2_EIP2537_LEN] {
        pad_fields(&self.0.serialize(), &G2_ORDER)
    }

    /// Verifies this signature over `digest` by `key` (one pairing check).
    pub fn verify(&self, key: &PublicKey, digest: &B256) -> Result<()> {
        match self.0.verify(false, digest.as_slice(), SIGNATURE_DST, &[], &key.0, false) {
            BLST_ERROR::BLST_SUCCESS => Ok(()),
            _ => Err(Error::VerifyFailed),
        }
    }

    /// Verifies this commitment signature over `message` by `key` under
    /// [`COMMIT_DST`] (one pairing check).
    pub fn verify_commit(&self, key: &PublicKey, message: &B256) -> Result<()> {
        match self.0.verify(false, message.as_slice(), COMMIT_DST, &[], &key.0, false) {
            BLST_ERROR::BLST_SUCCESS => Ok(()),
            _ => Err(Error::VerifyFailed),
        }
    }

    /// Checks a member record's signature (see [`SecretKey::sign_record`]).
    pub fn verify_record(&self, key: &PublicKey, message: &B256) -> Result<()> {
        match self.0.verify(false, message.as_slice(), RECORD_DST, &[], &key.0, false) {
            BLST_ERROR::BLST_SUCCESS => Ok(()),
            _ => Err(Error::VerifyFailed),
        }
    }

    /// The sum of `sigs`.
    pub fn aggregate<'a>(sigs: impl IntoIterator<Item = &'a Signature>) -> Result<Signature> {
        let sigs: Vec<&min_pk::Signature> = sigs.into_iter().map(|s| &s.0).collect();
        if sigs.is_empty() {
            return Err(Error::EmptyAggregate);
        }
        let agg = min_pk::AggregateSignature::aggregate(&sigs, false)
            .map_err(|e| encoding("signature", e))?;
        Ok(Signature(agg.to_signature()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u8) -> SecretKey {
        SecretKey::from_seed(&[i; 32]).unwrap()
    }

    #[test]
    fn sign_verify_and_reject_other_digest_or_key() {
        let sk = key(1);
        let digest = B256::repeat_byte(7);
        let sig = sk.sign(&digest);
        sig.verify(&sk.public_key(), &digest).unwrap();
        assert_eq!(sig.verify(&sk.public_key(), &B256::repeat_byte(8)), Err(Error::VerifyFailed));
        assert_eq!(sig.verify(&key(2).public_key(), &digest), Err(Error::VerifyFailed));
    }

    #[test]
    fn commitment_signatures_are_not_verdict_signatures() {
        let sk = key(1);
        let message = B256::repeat_byte(7);
        let commit = sk.sign_commit(&message);
        commit.verify_commit(&sk.public_key(), &message).unwrap();
        assert_eq!(commit.verify(&sk.public_key(), &message), Err(Error::VerifyFailed));
        let verdict = sk.sign(&message);
        assert_eq!(verdict.verify_commit(&sk.public_key(), &message), Err(Error::VerifyFailed));
        assert_eq!(commit.verify_commit(&key(2).public_key(), &message), Err(Error::VerifyFailed));
    }

    /// A member record's signature is neither a verdict nor a commitment
    /// signature, and neither of those is a record's.
    #[test]
    fn record_signatures_are_their_own() {
        let (sk, pk) = (key(1), key(1).public_key());
        let message = B256::repeat_byte(7);
        let record = sk.sign_record(&message);
        record.verify_record(&pk, &message).unwrap();
        assert_eq!(record.verify(&pk, &message), Err(Error::VerifyFailed));
        assert_eq!(record.verify_commit(&pk, &message), Err(Error::VerifyFailed));
        for other in [sk.sign(&message), sk.sign_commit(&message)] {
            assert_eq!(other.verify_record(&pk, &message), Err(Error::VerifyFailed));
        }
        assert_eq!(record.verify_record(&key(2).public_key(), &message), Err(Error::VerifyFailed));
    }

    #[test]
    fn proof_of_possession() {
        let sk = key(3);
        sk.public_key().verify_possession(&sk.prove_possession()).unwrap();
        // A PoP is not a signature over the key under the signing DST.
        let forged = sk.sign_with_dst(&sk.public_key().compress(), SIGNATURE_DST);
        assert_eq!(
            sk.public_key().verify_possession(&forged),
            Err(Error::InvalidProofOfPossession)
        );
        assert_eq!(
            key(4).public_key().verify_possession(&sk.prove_possession()),
            Err(Error::InvalidProofOfPossession)
        );
    }

    #[test]
    fn bound_proof_of_possession() {
        let sk = key(3);
        let pk = sk.public_key();
        let binding = PossessionBinding {
            chain_id: 1,
            registry: Address::repeat_byte(0xaa),
            operator: Address::repeat_byte(0xbb),
        };
        let pop = sk.prove_possession_for(&binding);
        pk.verify_possession_for(&pop, &binding).unwrap();
        // Bound to the operator, the registry and the chain; not an unbound PoP.
        for other in [
            PossessionBinding { operator: Address::repeat_byte(0xcc), ..binding },
            PossessionBinding { registry: Address::repeat_byte(0xcc), ..binding },
            PossessionBinding { chain_id: 2, ..binding },
        ] {
            assert_eq!(
                pk.verify_possession_for(&pop, &other),
                Err(Error::InvalidProofOfPossession)
            );
        }
        assert_eq!(pk.verify_possession(&pop), Err(Error::InvalidProofOfPossession));
        assert_eq!(
            pk.verify_possession_for(&sk.prove_possession(), &binding),
            Err(Error::InvalidProofOfPossession)
        );
        let m = binding.message(&pk);
        assert_eq!(&m[..48], &pk.compress());
        assert_eq!(m[48 + 31], 1);
        assert_eq!(&m[80..100], &[0xaa; 20]);
        assert_eq!(&m[100..], &[0xbb; 20]);
    }

    #[test]
    fn encodings_roundtrip() {
        let sk = key(5);
        let pk = sk.public_key();
        let sig = sk.sign(&B256::ZERO);
        assert_eq!(PublicKey::from_compressed(&pk.compress()).unwrap(), pk);
        assert_eq!(PublicKey::from_eip2537(&pk.to_eip2537()).unwrap(), pk);
        assert_eq!(Signature::from_compressed(&sig.compress()).unwrap(), sig);
        assert_eq!(Signature::from_eip2537(&sig.to_eip2537()).unwrap(), sig);
        // The EIP-2537 G2 form starts with x.c0, which blst serialises second.
        let ser = sig.0.serialize();
        assert_eq!(&sig.to_eip2537()[16..64], &ser[48..96]);
        assert_eq!(&sig.to_eip2537()[80..128], &ser[0..48]);
    }

    #[test]
    fn rejects_bad_points() {
        let pk = key(6).public_key();
        let mut padded = pk.to_eip2537();
        padded[0] = 1;
        assert!(matches!(PublicKey::from_eip2537(&padded), Err(Error::InvalidEncoding { .. })));
        let mut off_curve = pk.to_eip2537();
        off_curve[127] ^= 1;
        assert!(matches!(PublicKey::from_eip2537(&off_curve), Err(Error::InvalidEncoding { .. })));
        assert_eq!(
            PublicKey::from_eip2537(&[0u8; G1_EIP2537_LEN]),
            Err(Error::Infinity { what: "G1 point" })
        );
        assert_eq!(
            Signature::from_eip2537(&[0u8; G2_EIP2537_LEN]),
            Err(Error::Infinity { what: "G2 point" })
        );
        let mut inf = [0u8; PUBLIC_KEY_LEN];
        inf[0] = 0xc0;
        assert_eq!(PublicKey::from_compressed(&inf), Err(Error::Infinity { what: "public key" }));
        let mut inf = [0u8; SIGNATURE_LEN];
        inf[0] = 0xc0;
        assert_eq!(Signature::from_compressed(&inf), Err(Error::Infinity { what: "signature" }));
        assert!(matches!(
            Signature::from_compressed(&[0u8; 95]),
            Err(Error::InvalidEncoding { .. })
        ));
    }

    #[test]
    fn aggregate_verifies_against_aggregate_key() {
        let digest = B256::repeat_byte(9);
        let sks: Vec<_> = (10..14).map(key).collect();
        let pks: Vec<_> = sks.iter().map(SecretKey::public_key).collect();
        let sigs: Vec<_> = sks.iter().map(|s| s.sign(&digest)).collect();
        let agg = Signature::aggregate(&sigs).unwrap();
        agg.verify(&PublicKey::aggregate(&pks).unwrap(), &digest).unwrap();
        assert_eq!(
            agg.verify(&PublicKey::aggregate(&pks[1..]).unwrap(), &digest),
            Err(Error::VerifyFailed)
        );
        assert_eq!(Signature::aggregate(&[]), Err(Error::EmptyAggregate));
    }

    #[test]
    fn secret_key_debug_is_redacted() {
        let sk = key(1);
        assert_eq!(format!("{sk:?}"), "SecretKey(<redacted>)");
        assert_eq!(SecretKey::from_bytes(&[0u8; 32]).unwrap_err(), Error::InvalidSecretKey);
        assert_eq!(SecretKey::from_seed(&[1u8; 31]).unwrap_err(), Error::WeakSeed { len: 31 });
    }
}
