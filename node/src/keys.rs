//! `resolvd keys`: create, import, show and export BLS keys kept in EIP-2335
//! keystores. Passwords come from a file or `RESOLVD_KEYSTORE_PASSWORD`, never
//! from a command-line value.

/// EIP-2335 keystores.
pub mod keystore;

use crate::keys::keystore::{Kdf, Keystore};
use alloy_primitives::hex;
use eyre::{bail, eyre, WrapErr};
use resolvd_consensus::SecretKey;
use serde_json::json;
use std::{
    fs,
    io::Write,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};
use zeroize::Zeroizing;

/// Loads the transaction account (secp256k1) from an encrypted JSON keystore.
pub fn load_account(
    keystore: &Path,
    password_file: &Path,
) -> eyre::Result<alloy_signer_local::PrivateKeySigner> {
    let password = PasswordArgs { password_file: Some(password_file.into()) }.password()?;
    alloy_signer_local::PrivateKeySigner::decrypt_keystore(keystore, password.as_bytes())
        .map_err(|e| eyre::eyre!("account keystore {}: {e}", keystore.display()))
}

/// Environment variable holding the keystore password when no file is given.
pub const PASSWORD_ENV: &str = "RESOLVD_KEYSTORE_PASSWORD";

/// Where the keystore password comes from.
#[derive(Clone, Debug, clap::Args)]
pub struct PasswordArgs {
    /// File holding the keystore password (one trailing newline is ignored).
    /// Without it, the password is read from $RESOLVD_KEYSTORE_PASSWORD.
    #[arg(long, value_name = "FILE")]
    pub password_file: Option<PathBuf>,
}

impl PasswordArgs {
    /// The password, wiped from memory when dropped (the whole buffer: zeroize
    /// clears a `String`'s spare capacity too, so the trimmed newline goes with it).
    pub fn password(&self) -> eyre::Result<Zeroizing<String>> {
        let mut text = Zeroizing::new(match &self.password_file {
            Some(path) => fs::read_to_string(path)
                .wrap_err_with(|| format!("reading password file {}", path.display()))?,
            None => std::env::var(PASSWORD_ENV).map_err(|_| {
                eyre!("no password: pass --password-file FILE or set ${PASSWORD_ENV}")
            })?,
        });
        if self.password_file.is_some() {
            if text.ends_with('\n') {
                text.pop();
            }
            if text.ends_with('\r') {
                text.pop();
            }
        }
        Ok(text)
    }
}

/// Reads and decrypts a keystore file.
pub fn load(keystore: &Path, password: &PasswordArgs) -> eyre::Result<SecretKey> {
    let json = fs::read_to_string(keystore)
        .wrap_err_with(|| format!("reading keystore {}", keystore.display()))?;
    let ks = Keystore::from_json(&json).wrap_err("parsing the keystore")?;
    ks.decrypt(&password.password()?).wrap_err("decrypting the keystore")
}

/// Encrypts `secret` into a new keystore file (mode 0600; never overwrites).
pub fn save(
    secret: &SecretKey,
    keystore: &Path,
    password: &PasswordArgs,
    kdf: Kdf,
) -> eyre::Result<()> {
    let password = password.password()?;
    if password.is_empty() {
        bail!("refusing an empty keystore password");
    }
    let ks = Keystore::encrypt(secret, &password, kdf, "").wrap_err("encrypting the key")?;
    write_private(keystore, ks.to_json().as_bytes())
}

/// Writes a new secret file: mode 0600, never overwriting, synced.
pub fn write_private(path: &Path, bytes: &[u8]) -> eyre::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .wrap_err_with(|| format!("creating {} (it must not exist yet)", path.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}

/// A fresh key from 32 bytes of OS randomness (EIP-2333 master key).
pub fn generate() -> eyre::Result<SecretKey> {
    let mut seed = Zeroizing::new([0u8; 32]);
    getrandom::fill(seed.as_mut()).map_err(|e| eyre!("randomness: {e}"))?;
    Ok(SecretKey::from_seed(seed.as_ref())?)
}

/// Reads a hex secret key (as `keys import` takes it) from a file.
pub fn read_secret(path: &Path) -> eyre::Result<SecretKey> {
    let text = Zeroizing::new(
        fs::read_to_string(path).wrap_err_with(|| format!("reading {}", path.display()))?,
    );
    let bytes = Zeroizing::new(
        hex::decode(text.trim()).map_err(|_| eyre!("the secret file must hold 32 bytes of hex"))?,
    );
    let bytes: [u8; 32] =
        bytes.as_slice().try_into().map_err(|_| eyre!("the secret must be 32 bytes"))?;
    Ok(SecretKey::from_bytes(&bytes)?)
}

/// The public registration data of a key: compressed key, EIP-2537 key and
/// proof of possession, as `ResolverRegistry.register` takes them.
///
/// The proof of possession is not part of it: it is bound to the chain id,
/// the registry and the operator that registers (`resolvd register` makes it).
pub fn registration(secret: &SecretKey) -> serde_json::Value {
    let pk = secret.public_key();
    json!({
        "publicKey": hex::encode_prefixed(pk.compress()),
        "publicKeyG1": hex::encode_prefixed(pk.to_eip2537()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_refuses_overwrite_and_keeps_mode() {
        let dir = tempfile::tempdir().unwrap();
        let pw_file = dir.path().join("pw");
        fs::write(&pw_file, "hunter2\n").unwrap();
        let pw = PasswordArgs { password_file: Some(pw_file) };
        let path = dir.path().join("key.json");
        let sk = SecretKey::from_seed(&[5u8; 32]).unwrap();
        save(&sk, &path, &pw, Kdf::Pbkdf2).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load(&path, &pw).unwrap().to_bytes(), sk.to_bytes());
        assert!(save(&sk, &path, &pw, Kdf::Pbkdf2).is_err(), "must not overwrite");
        let reg = registration(&sk);
        let pk = resolvd_consensus::PublicKey::from_eip2537(
            &hex::decode(reg["publicKeyG1"].as_str().unwrap()).unwrap(),
        )
        .unwrap();
        assert_eq!(pk, sk.public_key());
        assert!(reg.get("proofOfPossession").is_none(), "a PoP is bound at registration");
    }
}
