//! Every minute (an EventBridge schedule): settle or close the x402 payments that a crash, a
//! timeout or a lost connection left open. An HTTP function cannot lose work after it answers
//! (Lambda freezes it), so whatever it could not finish within its own timeout waits here.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    leasekit_core::bootstrap::sweep_payments().await
}
