//! What a Lambda function does once at init: logging, configuration, AWS clients, and, for the
//! functions that sign, the signing key. Nothing here runs per request.

use crate::config::{Config, ConfigError};
use crate::http::{AppState, Routes, Settings};
use crate::provenance::Issuer;
use crate::service::payments::Payments;

#[derive(Debug, thiserror::Error)]
pub enum BootError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("reading the signing key secret: {0}")]
    Secret(String),
    #[error("the signing key secret: {0}")]
    BadSeed(#[from] crate::provenance::issuer::BadSeed),
    #[error("setting up x402 payments (the facilitator's HTTPS client): {0}")]
    Payments(String),
}

/// Everything a function builds at init.
pub struct Boot {
    pub config: Config,
    pub aws: aws_config::SdkConfig,
    pub dynamodb: aws_sdk_dynamodb::Client,
}

/// Initialise logging, read the configuration and the AWS settings (region and role credentials
/// from the Lambda environment). Call once, before the first request.
pub async fn lambda() -> Result<Boot, BootError> {
    // One JSON object per line (CloudWatch Logs Insights reads the fields); metrics as EMF.
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        // The request's span (`span.id`) on every line it causes, and not the list of them all.
        .with_current_span(true)
        .with_span_list(false)
        .with_target(false)
        .init();
    crate::metrics::enable();
    let config = Config::from_env()?;
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let dynamodb = aws_sdk_dynamodb::Client::from_conf(
        crate::store::client::configure(aws_sdk_dynamodb::config::Builder::from(&aws)).build(),
    );
    Ok(Boot {
        config,
        aws,
        dynamodb,
    })
}

impl Boot {
    /// x402 payments as configured (`None` without `X402_PAY_TO`).
    pub fn payments(&self) -> Result<Option<Payments>, BootError> {
        self.config
            .payments
            .as_ref()
            .map(|config| Payments::open(config, self.dynamodb.clone(), &self.config.tables))
            .transpose()
            .map_err(|e| BootError::Payments(e.to_string()))
    }

    /// The signing key, from the Secrets Manager secret `SIGNING_KEY_SECRET` (64 hex characters).
    pub async fn issuer(&self) -> Result<Issuer, BootError> {
        let id = self
            .config
            .signing_key_secret
            .as_deref()
            .ok_or(ConfigError::Missing("SIGNING_KEY_SECRET"))?;
        let secret = aws_sdk_secretsmanager::Client::new(&self.aws)
            .get_secret_value()
            .secret_id(id)
            .send()
            .await
            .map_err(|e| {
                BootError::Secret(
                    aws_sdk_secretsmanager::error::DisplayErrorContext(&e).to_string(),
                )
            })?;
        let text = secret
            .secret_string()
            .ok_or_else(|| BootError::Secret("the secret has no string value".into()))?;
        let issuer = Issuer::from_hex(text)?;
        tracing::info!(issuer = issuer.did(), "signing key loaded");
        Ok(issuer)
    }
}

/// Serve one function's `routes` on Lambda: init as above, load the signing key if they sign
/// (only then: the other functions' roles may not read it), then run their router until the
/// runtime stops.
pub async fn serve_http(routes: Routes) -> Result<(), lambda_http::Error> {
    let boot = lambda().await?;
    let issuer = if routes.signs() {
        Some(boot.issuer().await?)
    } else {
        None
    };
    let public = boot
        .config
        .public_url
        .clone()
        .ok_or(ConfigError::Missing("LEASEKIT_PUBLIC_URL"))
        .map_err(BootError::from)?;
    let state = AppState::new(Settings {
        payments: boot.payments()?,
        dynamodb: boot.dynamodb,
        tables: boot.config.tables,
        issuer,
        free_claims_per_hour: boot.config.free_claims_per_hour,
        public,
        on_lambda: true,
        key_changes: None,
        waits_per_payer: None,
    });
    lambda_http::run(crate::http::lambda::service(state, routes)).await
}

/// The settlement sweeper on Lambda: each scheduled invocation closes the payments left open
/// for longer than the sweep grace ([`crate::payment::lifecycle::SWEEP_GRACE`]), a page at a
/// time, within the invocation's time.
pub async fn sweep_payments() -> Result<(), lambda_http::Error> {
    use lambda_http::{LambdaEvent, service_fn};
    const PAGE: i32 = 100;
    const PAGES: usize = 20;
    let boot = lambda().await?;
    let payments = boot.payments()?;
    let handler = service_fn(move |_: LambdaEvent<serde_json::Value>| {
        let payments = payments.clone();
        async move {
            let mut total = crate::service::payments::Swept::default();
            let Some(payments) = payments else {
                return Ok::<_, lambda_http::Error>(serde_json::json!(total));
            };
            for _ in 0..PAGES {
                let swept = payments.sweep_due(crate::clock::now_ms(), PAGE).await?;
                total.add(&swept);
                if swept.total() < PAGE.unsigned_abs() || swept.failed > 0 {
                    break;
                }
            }
            Ok(serde_json::json!(total))
        }
    });
    lambda_http::lambda_runtime::run(handler).await
}
