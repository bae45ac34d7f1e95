//! EIP-2335 BLS keystores: scrypt or PBKDF2-HMAC-SHA256, AES-128-CTR, SHA-256
//! checksum. The resolver's BLS key lives on disk only in this form; the
//! password comes from a file or the environment, never from a flag.

use aes::cipher::{KeyIvInit, StreamCipher};
use alloy_primitives::hex;
use resolvd_consensus::{PublicKey, SecretKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use unicode_normalization::UnicodeNormalization;
use zeroize::Zeroizing;

/// Why a keystore could not be read, decrypted or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeystoreError {
    /// Not a keystore JSON document.
    #[error("not an EIP-2335 keystore: {0}")]
    Json(#[from] serde_json::Error),
    /// A version other than 4.
    #[error("keystore version {0} is not supported (only 4)")]
    Version(u32),
    /// An unsupported module function or parameter.
    #[error("unsupported {module}: {detail}")]
    Unsupported {
        /// kdf, cipher or checksum.
        module: &'static str,
        /// What is unsupported.
        detail: String,
    },
    /// A hex field does not decode or has the wrong length.
    #[error("malformed {0}")]
    Malformed(&'static str),
    /// The checksum does not match: wrong password or a damaged file.
    #[error("wrong password (checksum mismatch)")]
    WrongPassword,
    /// The decrypted secret is not a valid BLS secret key.
    #[error("decrypted secret is not a BLS secret key")]
    InvalidSecret,
    /// The stored public key does not belong to the decrypted secret.
    #[error("the keystore's pubkey does not match its secret")]
    PubkeyMismatch,
    /// The OS random source failed.
    #[error("randomness: {0}")]
    Random(String),
}

/// A keystore module: `{ function, params, message }`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Module<P> {
    /// Algorithm name.
    pub function: String,
    /// Algorithm parameters.
    pub params: P,
    /// Hex message (checksum or ciphertext; empty for the KDF).
    pub message: String,
}

/// KDF parameters (the shape selects scrypt or PBKDF2).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum KdfParams {
    /// scrypt.
    Scrypt {
        /// Derived key length (32).
        dklen: u32,
        /// Cost (a power of two).
        n: u32,
        /// Parallelism.
        p: u32,
        /// Block size.
        r: u32,
        /// Hex salt.
        salt: String,
    },
    /// PBKDF2.
    Pbkdf2 {
        /// Derived key length (32).
        dklen: u32,
        /// Iterations.
        c: u32,
        /// Pseudo-random function (hmac-sha256).
        prf: String,
        /// Hex salt.
        salt: String,
    },
}

/// AES-128-CTR parameters.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CipherParams {
    /// Hex 16-byte IV.
    pub iv: String,
}

/// The checksum module has no parameters.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// The three crypto modules.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Crypto {
    /// Key derivation.
    pub kdf: Module<KdfParams>,
    /// Password check.
    pub checksum: Module<NoParams>,
    /// Secret encryption.
    pub cipher: Module<CipherParams>,
}

/// An EIP-2335 (version 4) keystore.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Keystore {
    /// The crypto modules.
    pub crypto: Crypto,
    /// Free text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Hex compressed public key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pubkey: Option<String>,
    /// EIP-2334 path ("" when not derived from a path).
    pub path: String,
    /// UUID v4.
    pub uuid: String,
    /// Always 4.
    pub version: u32,
}

/// The KDF to encrypt with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kdf {
    /// scrypt with n = 2^18, r = 8, p = 1 (the EIP-2335 default).
    Scrypt,
    /// PBKDF2-HMAC-SHA256 with 2^18 iterations.
    Pbkdf2,
}

/// EIP-2335 password processing: NFKD, then remove C0, C1 and DEL control codes.
pub fn normalize_password(password: &str) -> Zeroizing<Vec<u8>> {
    let s: String =
        password.nfkd().filter(|c| !matches!(*c as u32, 0x00..=0x1f | 0x7f..=0x9f)).collect();
    Zeroizing::new(s.into_bytes())
}

fn unhex(field: &'static str, s: &str, len: Option<usize>) -> Result<Vec<u8>, KeystoreError> {
    let v = hex::decode(s).map_err(|_| KeystoreError::Malformed(field))?;
    match len {
        Some(n) if v.len() != n => Err(KeystoreError::Malformed(field)),
        _ => Ok(v),
    }
}

fn derive(kdf: &KdfParams, password: &[u8]) -> Result<Zeroizing<Vec<u8>>, KeystoreError> {
    let unsupported = |detail: String| KeystoreError::Unsupported { module: "kdf", detail };
    let mut key = Zeroizing::new(vec![0u8; 32]);
    match kdf {
        KdfParams::Scrypt { dklen, n, p, r, salt } => {
            if *dklen != 32 || !n.is_power_of_two() || *n < 2 {
                return Err(unsupported(format!("scrypt dklen {dklen}, n {n}")));
            }
            let params = scrypt::Params::new(n.trailing_zeros() as u8, *r, *p)
                .map_err(|e| unsupported(e.to_string()))?;
            scrypt::scrypt(password, &unhex("kdf salt", salt, None)?, &params, &mut key)
                .map_err(|e| unsupported(e.to_string()))?;
        }
        KdfParams::Pbkdf2 { dklen, c, prf, salt } => {
            if *dklen != 32 || prf != "hmac-sha256" || *c == 0 {
                return Err(unsupported(format!("pbkdf2 dklen {dklen}, prf {prf}, c {c}")));
            }
            pbkdf2::pbkdf2::<hmac::Hmac<Sha256>>(
                password,
                &unhex("kdf salt", salt, None)?,
                *c,
                &mut key,
            )
            .map_err(|e| unsupported(e.to_string()))?;
        }
    }
    Ok(key)
}

fn checksum(key: &[u8], ciphertext: &[u8]) -> [u8; 32] {
    Sha256::new().chain_update(&key[16..32]).chain_update(ciphertext).finalize().into()
}

fn aes_ctr(key: &[u8], iv: &[u8], data: &mut [u8]) -> Result<(), KeystoreError> {
    let mut cipher = ctr::Ctr128BE::<aes::Aes128>::new_from_slices(&key[..16], iv)
        .map_err(|_| KeystoreError::Malformed("cipher iv"))?;
    cipher.apply_keystream(data);
    Ok(())
}

impl Keystore {
    /// Parses a keystore JSON document.
    pub fn from_json(json: &str) -> Result<Self, KeystoreError> {
        let ks: Self = serde_json::from_str(json)?;
        if ks.version != 4 {
            return Err(KeystoreError::Version(ks.version));
        }
        let check = |module: &'static str, found: &str, want: &[&str]| {
            if want.contains(&found) {
                Ok(())
            } else {
                Err(KeystoreError::Unsupported { module, detail: found.into() })
            }
        };
        check("kdf", &ks.crypto.kdf.function, &["scrypt", "pbkdf2"])?;
        check("checksum", &ks.crypto.checksum.function, &["sha256"])?;
        check("cipher", &ks.crypto.cipher.function, &["aes-128-ctr"])?;
        Ok(ks)
    }

    /// The JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("keystore serialises")
    }

    /// Decrypts the secret key with `password` (normalised per EIP-2335).
    pub fn decrypt(&self, password: &str) -> Result<SecretKey, KeystoreError> {
        let password = normalize_password(password);
        let key = derive(&self.crypto.kdf.params, &password)?;
        let ciphertext = unhex("cipher message", &self.crypto.cipher.message, None)?;
        let want = unhex("checksum", &self.crypto.checksum.message, Some(32))?;
        if checksum(&key, &ciphertext)[..] != want[..] {
            return Err(KeystoreError::WrongPassword);
        }
        let iv = unhex("cipher iv", &self.crypto.cipher.params.iv, Some(16))?;
        let mut secret = Zeroizing::new(ciphertext);
        aes_ctr(&key, &iv, &mut secret)?;
        let bytes: [u8; 32] =
            secret.as_slice().try_into().map_err(|_| KeystoreError::InvalidSecret)?;
        let sk = SecretKey::from_bytes(&bytes).map_err(|_| KeystoreError::InvalidSecret)?;
        if let Some(pubkey) = &self.pubkey {
            if unhex("pubkey", pubkey, Some(48))? != sk.public_key().compress() {
                return Err(KeystoreError::PubkeyMismatch);
            }
        }
        Ok(sk)
    }

    /// Encrypts `secret` under `password` with fresh random salt, IV and UUID.
    pub fn encrypt(
        secret: &SecretKey,
        password: &str,
        kdf: Kdf,
        path: &str,
    ) -> Result<Self, KeystoreError> {
        let mut random = [0u8; 64];
        getrandom::fill(&mut random).map_err(|e| KeystoreError::Random(e.to_string()))?;
        let salt = hex::encode(&random[..32]);
        let iv = &random[32..48];
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&random[48..64]);
        uuid[6] = (uuid[6] & 0x0f) | 0x40; // version 4
        uuid[8] = (uuid[8] & 0x3f) | 0x80; // RFC 4122 variant
        let h = hex::encode(uuid);
        let uuid = format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..]);
        let params = match kdf {
            Kdf::Scrypt => KdfParams::Scrypt { dklen: 32, n: 1 << 18, p: 1, r: 8, salt },
            Kdf::Pbkdf2 => {
                KdfParams::Pbkdf2 { dklen: 32, c: 1 << 18, prf: "hmac-sha256".into(), salt }
            }
        };
        let key = derive(&params, &normalize_password(password))?;
        let mut ciphertext = secret.to_bytes().to_vec();
        aes_ctr(&key, iv, &mut ciphertext)?;
        Ok(Self {
            crypto: Crypto {
                kdf: Module {
                    function: match kdf {
                        Kdf::Scrypt => "scrypt".into(),
                        Kdf::Pbkdf2 => "pbkdf2".into(),
                    },
                    params,
                    message: String::new(),
                },
                checksum: Module {
                    function: "sha256".into(),
                    params: NoParams {},
                    message: hex::encode(checksum(&key, &ciphertext)),
                },
                cipher: Module {
                    function: "aes-128-ctr".into(),
                    params: CipherParams { iv: hex::encode(iv) },
                    message: hex::encode(&ciphertext),
                },
            },
            description: Some("resolvd resolver BLS key".into()),
            pubkey: Some(hex::encode(secret.public_key().compress())),
            path: path.into(),
            uuid,
            version: 4,
        })
    }

    /// The stored public key, if present and well formed.
    pub fn public_key(&self) -> Option<PublicKey> {
        let bytes = hex::decode(self.pubkey.as_ref()?).ok()?;
        PublicKey::from_compressed(&bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EIP-2335's test password, "𝔱𝔢𝔰𝔱𝔭𝔞𝔰𝔰𝔴𝔬𝔯𝔡🔑", and secret.
    const PASSWORD: &str = "\u{1d531}\u{1d522}\u{1d530}\u{1d531}\u{1d52d}\u{1d51e}\u{1d530}\u{1d530}\u{1d534}\u{1d52c}\u{1d52f}\u{1d521}\u{1f511}";
    const SECRET: &str = "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f";

    const SCRYPT_VECTOR: &str = include_str!("../../tests/vectors/eip2335_scrypt.json");
    const PBKDF2_VECTOR: &str = include_str!("../../tests/vectors/eip2335_pbkdf2.json");

    #[test]
    fn password_normalisation() {
        assert_eq!(normalize_password(PASSWORD).as_slice(), "testpassword\u{1f511}".as_bytes());
        assert_eq!(normalize_password("a\u{0}b\u{7f}c\u{85}d").as_slice(), b"abcd");
    }

    #[test]
    fn eip2335_test_vectors_decrypt() {
        for json in [SCRYPT_VECTOR, PBKDF2_VECTOR] {
            let ks = Keystore::from_json(json).unwrap();
            let sk = ks.decrypt(PASSWORD).unwrap();
            assert_eq!(hex::encode(*sk.to_bytes()), SECRET);
            assert_eq!(ks.public_key(), Some(sk.public_key()));
            assert!(matches!(ks.decrypt("testpassword"), Err(KeystoreError::WrongPassword)));
        }
    }

    #[test]
    fn encrypt_then_decrypt() {
        let sk = SecretKey::from_seed(&[9u8; 32]).unwrap();
        let ks = Keystore::encrypt(&sk, "correct horse", Kdf::Pbkdf2, "").unwrap();
        let back = Keystore::from_json(&ks.to_json()).unwrap();
        assert_eq!(back.decrypt("correct horse").unwrap().to_bytes(), sk.to_bytes());
        assert!(matches!(back.decrypt("wrong"), Err(KeystoreError::WrongPassword)));
        // Fresh randomness every time.
        let again = Keystore::encrypt(&sk, "correct horse", Kdf::Pbkdf2, "").unwrap();
        assert_ne!(again.crypto.cipher.message, ks.crypto.cipher.message);
        assert_ne!(again.uuid, ks.uuid);
    }

    #[test]
    fn refuses_unsupported_documents() {
        let bad = SCRYPT_VECTOR.replace("\"version\": 4", "\"version\": 3");
        assert!(matches!(Keystore::from_json(&bad), Err(KeystoreError::Version(3))));
        let bad = SCRYPT_VECTOR.replace("aes-128-ctr", "aes-256-gcm");
        assert!(matches!(Keystore::from_json(&bad), Err(KeystoreError::Unsupported { .. })));
        let ks = Keystore::from_json(SCRYPT_VECTOR).unwrap();
        let mut tampered = ks.clone();
        tampered.pubkey =
            Some(hex::encode(SecretKey::from_seed(&[1u8; 32]).unwrap().public_key().compress()));
        assert!(matches!(tampered.decrypt(PASSWORD), Err(KeystoreError::PubkeyMismatch)));
    }
}
