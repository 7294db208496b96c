//! `leasekit keys create|revoke`: API keys in the data dir's store or any DynamoDB.

use crate::connect::{Store, StoreArgs};
use anyhow::{Context, Result, bail};
use clap::Subcommand;
use leasekit_core::clock::now_ms;
use leasekit_core::keys::{ApiKey, KeyId, KeyRecord};
use leasekit_core::store::KeyStore;
use leasekit_core::tenant::is_valid_name;

#[derive(Subcommand)]
pub enum KeysCommand {
    /// Create a key for ACCOUNT. Prints the key (shown only this once) on stdout, nothing else.
    Create {
        #[arg(long)]
        account: String,
        /// With the admin role: it may revoke its account's leases and read their audit.
        #[arg(long)]
        admin: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a key by its id (printed at creation), or by the key itself.
    Revoke {
        key_id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

pub async fn run(command: KeysCommand) -> Result<()> {
    match command {
        KeysCommand::Create {
            account,
            admin,
            store: args,
        } => {
            if !is_valid_name(&account) {
                bail!("--account must match [A-Za-z0-9_.-]{{1,64}}");
            }
            let (location, creating) = crate::connect::location(&args);
            let store = Store::open(&args).await?;
            let keys = KeyStore::new(store.client.clone(), &store.tables.keys);
            let key = ApiKey::generate()
                .map_err(|e| anyhow::anyhow!("no randomness from the OS: {e}"))?;
            if !keys
                .insert(&KeyRecord::new(&key, &account, now_ms()).with_admin(admin))
                .await?
            {
                bail!("a key with the same id exists already; run the command again");
            }
            drop(store);
            // The key is stored: shown before anything else can fail, or it would be stored and
            // never seen (found by the attack of 2026-12-04: with keys.generation unwritable,
            // create exited with an error and printed no key).
            println!("{}", key.expose());
            eprintln!(
                "created {}key {} for account {account} in {location}; it is not shown again",
                if admin { "admin " } else { "" },
                key.id().as_str()
            );
            if creating {
                // A key in a store no server reads answers 401 everywhere (the first hour's
                // sharpest edge: `keys create` run outside the server's directory).
                eprintln!(
                    "warning: there was no store there, so a new one was made: a server knows this \
                     key only if it runs on the same data dir (--data-dir or LEASEKIT_DATA_DIR; \
                     default .leasekit in the directory it is started from)"
                );
            }
            announce(&args)
        }
        KeysCommand::Revoke {
            key_id,
            store: args,
        } => {
            let Some(id) = KeyId::parse(&key_id).or_else(|| ApiKey::parse(&key_id).map(|k| k.id()))
            else {
                bail!("not a key id (16 hex characters) or a key");
            };
            let store = Store::open(&args).await?;
            let revoked = KeyStore::new(store.client.clone(), &store.tables.keys)
                .revoke(&id, now_ms())
                .await?;
            drop(store);
            if !revoked {
                bail!("no key with id {}", id.as_str());
            }
            announce(&args)?;
            eprintln!("revoked key {}", id.as_str());
            Ok(())
        }
    }
}

/// Tell a `leasekit serve` running on the same embedded store that its keys changed. (A server
/// on a DynamoDB endpoint reads the keys on every request.)
fn announce(args: &StoreArgs) -> Result<()> {
    if args.dynamodb_endpoint.is_some() {
        return Ok(());
    }
    crate::key_changes::changed(&args.data_dir).with_context(|| {
        format!(
            "the change is made, but a server running on this data dir may not see it for up to \
             {} s (as long as it remembers a key): cannot write its keys.generation file",
            leasekit_core::auth::LOCAL_KEY_CACHE.as_secs()
        )
    })
}

/// Register `ACCOUNT:KEY` pairs given to `serve --api-key` (or, `admin`, `--admin-key`). An
/// existing registration of the same key for the same account and role is fine; the same key
/// for another account or role is an error.
pub async fn seed(keys: &KeyStore, pairs: &[String], admin: bool) -> Result<()> {
    for pair in pairs {
        let Some((account, key)) = pair.split_once(':') else {
            bail!("--api-key takes ACCOUNT:KEY");
        };
        if !is_valid_name(account) {
            bail!("--api-key: the account must match [A-Za-z0-9_.-]{{1,64}}");
        }
        let Some(key) = ApiKey::parse(key) else {
            bail!("--api-key: a key is 16 to 256 printable ASCII characters without spaces");
        };
        if !keys
            .insert(&KeyRecord::new(&key, account, now_ms()).with_admin(admin))
            .await?
        {
            match keys.find(&key.id()).await? {
                Some(existing)
                    if existing.account == account
                        && existing.admin == admin
                        && existing.accepts(&key) => {}
                _ => bail!(
                    "--api-key/--admin-key: this key is registered to another account or role, or revoked"
                ),
            }
        }
    }
    Ok(())
}
