//! The `resolvd` command line, run as a process.

use std::process::Command;

fn resolvd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_resolvd"))
}

#[test]
fn keys_new_show_export_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let keystore = dir.path().join("key.json");
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "correct horse battery staple\n").unwrap();

    let out = resolvd()
        .args(["keys", "new", "--kdf", "pbkdf2", "--keystore"])
        .arg(&keystore)
        .arg("--password-file")
        .arg(&pw)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let created: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let out = resolvd().args(["keys", "show", "--keystore"]).arg(&keystore).output().unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["publicKeyG1"], created["publicKeyG1"]);

    // Export through the environment variable instead of a file.
    let out = resolvd()
        .args(["keys", "export", "--keystore"])
        .arg(&keystore)
        .env("RESOLVD_KEYSTORE_PASSWORD", "correct horse battery staple")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let exported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(exported, created);

    // A wrong password fails with a clear message and a non-zero exit.
    let out = resolvd()
        .args(["keys", "export", "--keystore"])
        .arg(&keystore)
        .env("RESOLVD_KEYSTORE_PASSWORD", "wrong")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("wrong password"));

    // Never overwrites an existing keystore.
    let out = resolvd()
        .args(["keys", "new", "--keystore"])
        .arg(&keystore)
        .arg("--password-file")
        .arg(&pw)
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn keys_import_matches_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    // EIP-2335's test secret: its public key is known.
    std::fs::write(&secret, "000000000019d6689c085ae165831e934ff763ae46a2a6c172b3f1b60a8ce26f\n")
        .unwrap();
    let keystore = dir.path().join("key.json");
    let out = resolvd()
        .args(["keys", "import", "--kdf", "pbkdf2", "--secret-file"])
        .arg(&secret)
        .arg("--keystore")
        .arg(&keystore)
        .env("RESOLVD_KEYSTORE_PASSWORD", "pw")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["publicKey"],
        "0x9612d7a727c9d0a22e185a1c768478dfe919cada9266988cb32359c11f2b7b27f4ae4040902382ae2910c15e2b420d07"
    );
}
