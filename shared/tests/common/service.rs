//! The lease service over a fresh set of tables: the one fixture of the suites that drive the
//! service (lease_store, semaphores, sets, list_revoke, waiting, faults), and the helpers they
//! share. Time is passed in.

use super::test_store;
use aws_sdk_dynamodb::Client;
use leasekit_core::clock::{Millis, now_ms};
use leasekit_core::lease::{LeaseAnswer, LeaseRequest};
use leasekit_core::provenance::Issuer;
use leasekit_core::service::lease::{Actor, LeaseError, LeaseService, SignedAnswer};
use leasekit_core::store::{LeaseKey, LeaseStore, Tables};
use leasekit_core::tenant::Tenant;
use serde_json::{Value, json};

/// The seed of the issuer that signs the answers: `Issuer::from_seed(&[SEED; 32])`.
pub const SEED: u8 = 9;

/// The tenant the calls are made for: acme's key tenant t1.
pub fn tenant() -> Tenant {
    Tenant::for_key("acme", "t1").unwrap()
}

pub struct Fixture {
    pub service: LeaseService,
    /// The service's own store, to read what it holds.
    pub store: LeaseStore,
    /// The DynamoDB client and the tables beneath the store, to read or write items as stored.
    pub client: Client,
    pub tables: Tables,
    pub tenant: Tenant,
    /// Who the calls are made as (the id an audit entry names): `None`, the tenant itself, as
    /// `LeaseService::execute` calls; see [`Fixture::acting_as`].
    pub actor: Option<String>,
    /// Whether that actor is an admin of the tenant (an API key with the admin role): see
    /// [`Fixture::acting_as_member`].
    pub admin: bool,
    /// Whether [`Fixture::call`] first checks that its body is a request the edge would take
    /// (the service does not check it): see [`Fixture::checking_shapes`].
    pub check_shapes: bool,
}

impl Fixture {
    /// The service over a fresh set of tables on the test store, signing with [`SEED`], called
    /// for [`tenant`].
    pub async fn new() -> Self {
        let test = test_store().await;
        Self::on(test.client, test.tables, SEED, tenant())
    }

    /// The service over `tables`, which exist already, through `client`, signing with the
    /// issuer of `seed`, called for `tenant`.
    pub fn on(client: Client, tables: Tables, seed: u8, tenant: Tenant) -> Self {
        let store = LeaseStore::new(client.clone(), &tables.leases, &tables.requests);
        Self {
            service: LeaseService::new(store.clone(), Issuer::from_seed(&[seed; 32])),
            store,
            client,
            tables,
            tenant,
            actor: None,
            admin: true,
            check_shapes: false,
        }
    }

    /// The calls made as `actor` (an API key's id, say), whatever tenant they are for.
    pub fn acting_as(mut self, actor: &str) -> Self {
        self.actor = Some(actor.to_owned());
        self
    }

    /// The calls made as `actor`, a key without the admin role.
    pub fn acting_as_member(mut self, actor: &str) -> Self {
        self.actor = Some(actor.to_owned());
        self.admin = false;
        self
    }

    /// Every body [`Fixture::call`] sends checked first for the shape errors the edge refuses.
    pub fn checking_shapes(mut self) -> Self {
        self.check_shapes = true;
        self
    }

    async fn execute(
        &self,
        tenant: &Tenant,
        r: &LeaseRequest,
        now: Millis,
    ) -> Result<SignedAnswer, LeaseError> {
        match &self.actor {
            None => self.service.execute(tenant, r, [0; 32], now).await,
            Some(id) => {
                let actor = Actor {
                    tenant,
                    id,
                    admin: self.admin,
                };
                self.service.execute_as(&actor, r, [0; 32], now, None).await
            }
        }
    }

    /// `r` at server time `now`, signed.
    pub async fn signed(&self, r: &LeaseRequest, now: Millis) -> SignedAnswer {
        self.execute(&self.tenant, r, now)
            .await
            .expect("store answers")
    }

    /// `r` at server time `now`.
    pub async fn run(&self, r: &LeaseRequest, now: Millis) -> LeaseAnswer {
        self.signed(r, now).await.data
    }

    /// `body` at server time `now`.
    pub async fn call(&self, body: Value, now: Millis) -> LeaseAnswer {
        let r = req(body.clone());
        if self.check_shapes {
            assert!(r.shape_errors().is_empty(), "{body}");
        }
        self.run(&r, now).await
    }

    /// `body` for `tenant` at server time `now`: its answer, or the service's error.
    pub async fn try_as(
        &self,
        tenant: &Tenant,
        body: Value,
        now: Millis,
    ) -> Result<LeaseAnswer, LeaseError> {
        Ok(self.execute(tenant, &req(body), now).await?.data)
    }

    /// `holder` acquires `resource` for 60 s at `now`, and is granted it.
    pub async fn acquire(&self, resource: &str, holder: &str, now: Millis) -> LeaseAnswer {
        let a = self
            .call(
                json!({"op": "acquire", "resource": resource, "holder": holder, "ttlSeconds": 60}),
                now,
            )
            .await;
        assert!(a.granted, "{a:?}");
        a
    }

    /// The last fencing token `resource` issued, as stored.
    pub async fn counter(&self, resource: &str) -> u64 {
        self.store
            .get(&LeaseKey::new(&self.tenant, resource))
            .await
            .unwrap()
            .last_token
    }
}

pub fn req(v: Value) -> LeaseRequest {
    serde_json::from_value(v).expect("valid request")
}

/// The rules the answer's witnesses cite, in order.
pub fn rules(a: &LeaseAnswer) -> Vec<&str> {
    a.witnesses.iter().map(|w| w.rule_id.as_str()).collect()
}

/// Resource `q`: a's 2 s lease, and w1's place behind it (its wait of 1 s over, so w1 is
/// between calls when the lease lapses at `now` + 2 s).
pub async fn lapsed_with_a_waiter_between_calls() -> (Fixture, Millis) {
    let f = Fixture::new().await;
    let now = now_ms();
    let short = json!({"op": "acquire", "resource": "q", "holder": "a", "ttlSeconds": 2});
    assert!(f.call(short, now).await.granted);
    let wait = json!({"op": "acquire", "resource": "q", "holder": "w1", "ttlSeconds": 60, "waitSeconds": 1});
    assert_eq!(f.call(wait, now).await.queue_position, Some(1));
    (f, now)
}
