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

/// `resolvd run` configuration precedence: defaults < file < environment < flags;
/// unknown keys and missing required values are errors.
#[test]
fn run_config_precedence_and_checks() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("node.toml");
    std::fs::write(
        &file,
        "[chain]\nescrow = \"0x00000000000000000000000000000000000e5c40\"\nconfirmations = 5\nrpc_url = \"http://file:8545\"\n[api]\nlisten = \"127.0.0.1:7000\"\n",
    )
    .unwrap();
    let print = |extra: &[&str], env: &[(&str, &str)]| {
        let mut cmd = resolvd();
        cmd.args(["run", "--print-config", "--config"]).arg(&file).args(extra);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let from_file = print(&[], &[]);
    assert!(from_file.contains("confirmations = 5"), "{from_file}");
    assert!(from_file.contains("rpc_url = \"http://file:8545\""));
    assert!(from_file.contains("poll_interval_ms = 1000"), "defaults fill the rest");
    let from_env =
        print(&[], &[("RESOLVD_CONFIRMATIONS", "7"), ("RESOLVD_RPC_URL", "http://env:8545")]);
    assert!(
        from_env.contains("confirmations = 7") && from_env.contains("http://env:8545"),
        "{from_env}"
    );
    let from_flag = print(&["--confirmations", "9"], &[("RESOLVD_CONFIRMATIONS", "7")]);
    assert!(from_flag.contains("confirmations = 9"), "{from_flag}");

    std::fs::write(&file, "[chain]\nconfirmation = 5\n").unwrap();
    let out = resolvd().args(["run", "--print-config", "--config"]).arg(&file).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown field"));
    std::fs::write(&file, "").unwrap();
    let out = resolvd().args(["run", "--print-config", "--config"]).arg(&file).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("chain.escrow is not set"));
}

/// Every command is documented in `--help`.
#[test]
fn help_lists_every_command() {
    let out = resolvd().arg("--help").output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for cmd in [
        "run",
        "register",
        "content",
        "anchor",
        "witness",
        "verify",
        "slash",
        "status",
        "inspect",
        "keys",
        "exit",
        "withdraw",
        "resolver",
        "protection",
    ] {
        assert!(help.lines().any(|l| l.trim_start().starts_with(cmd)), "{cmd} missing:\n{help}");
        let sub = resolvd().args([cmd, "--help"]).output().unwrap();
        assert!(sub.status.success() && !sub.stdout.is_empty(), "{cmd} --help");
    }
    // The local network and its demo are the `resolvd-devnet` binary, in no
    // build of the daemon.
    assert!(!resolvd().args(["devnet", "--help"]).output().unwrap().status.success());
}
