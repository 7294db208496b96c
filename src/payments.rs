//! `leasekit payments`: the x402 ledger, one JSON line per payment authorization, for
//! reconciliation (what was settled, what failed, what was voided or expired, what is open).

use crate::connect::{Store, StoreArgs};
use anyhow::Result;
use clap::Args;
use leasekit_core::store::PaymentLedger;

#[derive(Args)]
pub struct PaymentsArgs {
    #[command(flatten)]
    store: StoreArgs,
}

pub async fn run(args: PaymentsArgs) -> Result<()> {
    let store = Store::open(&args.store).await?;
    let rows = PaymentLedger::new(store.client.clone(), &store.tables)
        .all()
        .await?;
    drop(store);
    for row in rows {
        println!("{}", serde_json::to_string(&row)?);
    }
    Ok(())
}
