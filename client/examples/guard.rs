//! Hold a lease while doing work, and stop the moment it is lost.
//!
//! LEASEKIT_URL=http://127.0.0.1:3000 LEASEKIT_API_KEY=dev-key-0123456789 \
//!     cargo run -p leasekit-client --example guard

use leasekit_client::Client;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("LEASEKIT_URL").unwrap_or_else(|_| "http://127.0.0.1:3000".into());
    let key = std::env::var("LEASEKIT_API_KEY")?;
    let client = Client::with_api_key(&url, &key, "team-a")?;
    let mut guard = client
        .guard("deploy:prod", "example-worker", Duration::from_secs(30))
        .await?;
    let token = guard.fencing_token();
    println!("holding deploy:prod with fencing token {token}");
    tokio::select! {
        // Your work: send `token` with every write it makes, and have the store refuse smaller ones.
        () = tokio::time::sleep(Duration::from_secs(5)) => println!("work done"),
        lost = guard.lost() => {
            eprintln!("lease lost ({lost:?}): stop writing");
            return Ok(());
        }
    }
    guard.release().await?;
    Ok(())
}
