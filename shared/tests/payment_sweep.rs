//! The settlement sweeper over the real store: what a crash or a timeout left `accepted` is
//! settled when the answer it paid for committed, voided when it did not (or when the evidence
//! belongs to another call), recorded as expired when its authorization lapsed, and left alone
//! while it is younger than the cutoff. Each item is closed once.

mod common;

use common::test_store;
use leasekit_core::claims::Plan;
use leasekit_core::clock::{Millis, now_ms};
use leasekit_core::config::{ClaimPrices, FacilitatorConfig, PaymentConfig};
use leasekit_core::service::lease::REPLAY_WINDOW_MS;
use leasekit_core::service::payments::{Payments, Sale, Swept};
use leasekit_core::store::claim_store::claim_pk;
use leasekit_core::store::payment_store::Evidence;
use leasekit_core::store::{
    ClaimStore, Commit, LeaseStore, Outcome, PaymentLedger, RecordKey, RecordPut, Rounds,
    StoredRecord,
};
use leasekit_core::tenant::Tenant;
use leasekit_core::x402::client::{address_of, pay};
use leasekit_core::x402::settings::{BASE_SEPOLIA, BASE_SEPOLIA_USDC, PaymentSettings};
use std::collections::HashMap;

const PRICE: u64 = 5_000;

struct World {
    payments: Payments,
    ledger: PaymentLedger,
    leases: LeaseStore,
    claims: ClaimStore,
    wallet: k256::ecdsa::SigningKey,
}

async fn world() -> World {
    let store = test_store().await;
    let settings = PaymentSettings::new(
        BASE_SEPOLIA,
        BASE_SEPOLIA_USDC,
        "USDC",
        "2",
        "0x000000000000000000000000000000000000dEaD",
    )
    .unwrap();
    let config = PaymentConfig {
        settings,
        lease_price: PRICE,
        claim_prices: ClaimPrices::default(),
        facilitator: FacilitatorConfig::Local,
    };
    let ledger = PaymentLedger::new(store.client.clone(), &store.tables);
    World {
        payments: Payments::new(&config, ledger.clone()).unwrap(),
        ledger,
        leases: LeaseStore::new(
            store.client.clone(),
            &store.tables.leases,
            &store.tables.requests,
        ),
        claims: ClaimStore::new(store.client, &store.tables.claims),
        wallet: k256::ecdsa::SigningKey::from_slice(&[9; 32]).unwrap(),
    }
}

impl World {
    /// Accept a payment with `nonce` at `now`, pointing at `evidence`, as a call that then died.
    async fn accept(&self, nonce: u8, now: Millis, evidence: Evidence) {
        let requirements = self.payments.settings.requirements(PRICE);
        let now_s = u64::try_from(now / 1000).unwrap();
        let payment = pay(&self.wallet, &requirements, now_s, [nonce; 32]).unwrap();
        let sale = Sale {
            route: "POST /api/v1/lease",
            price: PRICE,
            request_sha256: [0; 32],
        };
        self.payments
            .accept(Some(Ok(payment)), &sale, now, |_| evidence)
            .await
            .expect("accepted");
    }

    /// A request record of this wallet's tenant, as a committed call at `now` leaves it.
    async fn record(&self, id: &str, now: Millis) -> String {
        let key = RecordKey::new(&self.tenant(), id);
        let record = StoredRecord {
            fingerprint: "f".into(),
            answer: "{}".into(),
            expires_at: now + REPLAY_WINDOW_MS,
            paid_by: None,
            queued: false,
        };
        put_record(&self.leases, &key, record, now).await;
        key.as_str().to_owned()
    }

    fn tenant(&self) -> Tenant {
        Tenant::for_wallet(&address_of(&self.wallet))
    }

    /// Ledger status by nonce.
    async fn statuses(&self) -> HashMap<u8, String> {
        self.ledger
            .all()
            .await
            .unwrap()
            .into_iter()
            .map(|row| {
                let nonce =
                    u8::from_str_radix(&row.authorization[row.authorization.len() - 2..], 16);
                (nonce.unwrap(), row.status.as_str().to_owned())
            })
            .collect()
    }
}

#[tokio::test]
async fn the_sweeper_settles_what_committed_and_closes_the_rest() {
    let w = world().await;
    let t = now_ms();
    let scope = w.tenant();
    // 1: a committed lease mutation; 2: its record never written; 3: the record is another
    // call's (an earlier one with the same requestId: its window ends elsewhere).
    let committed = w.record("req-1", t).await;
    w.accept(
        1,
        t,
        Evidence::Record {
            pk: committed,
            exp: t + REPLAY_WINDOW_MS,
        },
    )
    .await;
    let missing = RecordKey::new(&scope, "req-2").as_str().to_owned();
    w.accept(
        2,
        t,
        Evidence::Record {
            pk: missing,
            exp: t + REPLAY_WINDOW_MS,
        },
    )
    .await;
    let earlier = w.record("req-3", t - 60_000).await;
    w.accept(
        3,
        t,
        Evidence::Record {
            pk: earlier,
            exp: t + REPLAY_WINDOW_MS,
        },
    )
    .await;
    // 4: a claim won by the payer's holder at the call's time; 5: the key was held by another.
    w.claims
        .claim(scope.as_str(), "k4", "me", Plan::Hour, t, None)
        .await
        .unwrap();
    let pk4 = claim_pk(scope.as_str(), "k4");
    w.accept(
        4,
        t,
        Evidence::Claim {
            pk: pk4,
            holder: "me".into(),
            acquired: t,
        },
    )
    .await;
    w.claims
        .claim(scope.as_str(), "k5", "other", Plan::Hour, t - 1000, None)
        .await
        .unwrap();
    let pk5 = claim_pk(scope.as_str(), "k5");
    w.accept(
        5,
        t,
        Evidence::Claim {
            pk: pk5,
            holder: "me".into(),
            acquired: t,
        },
    )
    .await;
    // 6: a paid get (nothing durable); 7: too young for this sweep.
    w.accept(6, t, Evidence::None).await;
    let committed_late = w.record("req-7", t + 5_000).await;
    let late = Evidence::Record {
        pk: committed_late,
        exp: t + 5_000 + REPLAY_WINDOW_MS,
    };
    w.accept(7, t + 5_000, late).await;

    let swept = w.payments.sweep(t + 1_000, now_ms(), 100).await.unwrap();
    assert_eq!(
        swept,
        Swept {
            settled: 2,
            voided: 4,
            ..Swept::default()
        }
    );
    let statuses = w.statuses().await;
    let expected = [
        (1, "settled"),
        (2, "void"),
        (3, "void"),
        (4, "settled"),
        (5, "void"),
        (6, "void"),
        (7, "accepted"),
    ];
    for (nonce, status) in expected {
        assert_eq!(statuses[&nonce], status, "payment {nonce}");
    }
    // Closed items are never taken up again.
    let again = w.payments.sweep(t + 1_000, now_ms(), 100).await.unwrap();
    assert_eq!(again, Swept::default());

    // 7 committed, but nobody settled it before its authorization lapsed (300 s here).
    let too_late = now_ms() + 3_600_000;
    let swept = w.payments.sweep(t + 10_000, too_late, 100).await.unwrap();
    assert_eq!(
        swept,
        Swept {
            expired: 1,
            ..Swept::default()
        }
    );
    assert_eq!(w.statuses().await[&7], "expired");
}

/// The ledger's half of the `payment-identifier` extension, on each store the suite runs on
/// (the cancellation reasons of the two-item transaction are what tell the cases apart):
/// an authorization and its identifier are taken together or not at all.
#[tokio::test]
async fn an_identifier_is_taken_with_its_authorization_or_not_at_all() {
    use leasekit_core::store::payment_store::{
        Accepted, AuthorizationKey, Consumed, Identified, IdentifierKey,
    };
    let w = world().await;
    let now = now_ms();
    let accepted = Accepted {
        route: "POST /api/v1/lease",
        amount: "5000",
        pay_to: "0x000000000000000000000000000000000000dead",
        now,
        valid_before: 4_000_000_000,
        payment: "{}",
        evidence: &Evidence::None,
    };
    let auth = |nonce: u8| AuthorizationKey::new(BASE_SEPOLIA, "0xabc", &[nonce; 32]);
    let named = |id: &str, fingerprint: &str| Identified {
        key: IdentifierKey::new(BASE_SEPOLIA, "0xabc", id),
        fingerprint: fingerprint.to_owned(),
    };
    let first = named("pay_0123456789abcdef", "fp-1");
    assert_eq!(
        w.ledger
            .consume(&auth(1), &accepted, Some(&first))
            .await
            .unwrap(),
        Consumed::Yes
    );
    // The same authorization and identifier for the same request: the first use, as it stands.
    let again = w
        .ledger
        .consume(&auth(1), &accepted, Some(&first))
        .await
        .unwrap();
    let Consumed::Again(use_) = again else {
        panic!("{again:?}")
    };
    assert_eq!(
        (use_.status.as_str(), use_.accepted, use_.answer),
        ("accepted", now, None)
    );
    // An answer kept for it comes back with the next resend.
    w.ledger
        .keep_answer(&first.key, 201, r#"{"outcome":"acquired"}"#)
        .await
        .unwrap();
    let Consumed::Again(use_) = w
        .ledger
        .consume(&auth(1), &accepted, Some(&first))
        .await
        .unwrap()
    else {
        panic!("a resend")
    };
    assert_eq!(
        use_.answer,
        Some((201, r#"{"outcome":"acquired"}"#.to_owned()))
    );
    // None is kept for an identifier the ledger lacks.
    assert!(
        w.ledger
            .keep_answer(
                &IdentifierKey::new(BASE_SEPOLIA, "0xabc", "pay_never_used_0123"),
                200,
                "{}"
            )
            .await
            .is_err()
    );
    // The identifier on another authorization, or bound to another request: taken.
    assert_eq!(
        w.ledger
            .consume(&auth(2), &accepted, Some(&first))
            .await
            .unwrap(),
        Consumed::IdentifierTaken
    );
    assert_eq!(
        w.ledger
            .consume(
                &auth(1),
                &accepted,
                Some(&named("pay_0123456789abcdef", "fp-2"))
            )
            .await
            .unwrap(),
        Consumed::IdentifierTaken
    );
    // ... and that refusal took nothing: authorization 2 is still unused.
    assert_eq!(
        w.ledger.consume(&auth(2), &accepted, None).await.unwrap(),
        Consumed::Yes
    );
    // A used authorization under a new identifier: used before, and the new identifier is not
    // taken by it (it is still free for another payment).
    let fresh = named("pay_fedcba9876543210", "fp-3");
    assert_eq!(
        w.ledger
            .consume(&auth(1), &accepted, Some(&fresh))
            .await
            .unwrap(),
        Consumed::UsedBefore
    );
    assert_eq!(
        w.ledger
            .consume(&auth(3), &accepted, Some(&fresh))
            .await
            .unwrap(),
        Consumed::Yes
    );
    // Without an identifier, one use only.
    assert_eq!(
        w.ledger.consume(&auth(4), &accepted, None).await.unwrap(),
        Consumed::Yes
    );
    assert_eq!(
        w.ledger.consume(&auth(4), &accepted, None).await.unwrap(),
        Consumed::UsedBefore
    );
}

/// A call that answered but could not learn its settlement's outcome (the facilitator timed
/// out) is noted as answered: the sweeper settles it, though a read leaves no evidence; one that
/// never answered, with the same lack of evidence, is voided.
#[tokio::test]
async fn an_answered_payment_without_evidence_is_settled_not_voided() {
    use leasekit_core::store::payment_store::AuthorizationKey;
    let w = world().await;
    let t = now_ms();
    w.accept(21, t, Evidence::None).await;
    w.accept(22, t, Evidence::None).await;
    let payer = address_of(&w.wallet).lower();
    w.ledger
        .mark_answered(&AuthorizationKey::new(BASE_SEPOLIA, &payer, &[21; 32]))
        .await
        .unwrap();
    let swept = w.payments.sweep(t + 1_000, now_ms(), 100).await.unwrap();
    assert_eq!((swept.settled, swept.voided), (1, 1));
    let statuses = w.statuses().await;
    assert_eq!(
        (statuses[&21].as_str(), statuses[&22].as_str()),
        ("settled", "void")
    );
    // Noting a closed item is a no-op, not an error.
    w.ledger
        .mark_answered(&AuthorizationKey::new(BASE_SEPOLIA, &payer, &[22; 32]))
        .await
        .unwrap();
}

/// A call and its replay in the same millisecond, under two payments: their evidence is the same
/// record (or claim) at the same time, and only the payment the item names is settled. The
/// replay, which died before its void, used to be settled too.
#[tokio::test]
async fn a_same_millisecond_replay_is_not_taken_for_the_call_that_committed() {
    let w = world().await;
    let t = now_ms();
    let scope = w.tenant();
    let auth = |nonce: u8| {
        leasekit_core::store::payment_store::AuthorizationKey::new(
            BASE_SEPOLIA,
            &address_of(&w.wallet).lower(),
            &[nonce; 32],
        )
    };
    // A lease mutation: the record names payment 31.
    let key = RecordKey::new(&scope, "twin");
    let record = StoredRecord {
        fingerprint: "f".into(),
        answer: "{}".into(),
        expires_at: t + REPLAY_WINDOW_MS,
        paid_by: Some(auth(31).mark()),
        queued: false,
    };
    put_record(&w.leases, &key, record, t).await;
    for nonce in [31, 32] {
        let evidence = Evidence::Record {
            pk: key.as_str().to_owned(),
            exp: t + REPLAY_WINDOW_MS,
        };
        w.accept(nonce, t, evidence).await;
    }
    // A claim: won under payment 33, tried again by the same holder at the same time under 34.
    w.claims
        .claim(
            scope.as_str(),
            "twin",
            "me",
            Plan::Hour,
            t,
            Some(&auth(33).mark()),
        )
        .await
        .unwrap();
    for nonce in [33, 34] {
        let evidence = Evidence::Claim {
            pk: claim_pk(scope.as_str(), "twin"),
            holder: "me".into(),
            acquired: t,
        };
        w.accept(nonce, t, evidence).await;
    }
    let swept = w.payments.sweep(t + 1_000, now_ms(), 100).await.unwrap();
    assert_eq!((swept.settled, swept.voided), (2, 2), "{swept:?}");
    let statuses = w.statuses().await;
    let got: Vec<&str> = [31, 32, 33, 34]
        .iter()
        .map(|n| statuses[n].as_str())
        .collect();
    assert_eq!(got, ["settled", "void", "settled", "void"]);
}

/// A paid read under a payment identifier whose call died while settling: nothing but the answer
/// it kept for its resends shows that it answered, and that answer is what was sold. The sweeper
/// settles it (it used to void it, while the facilitator had settled it, and the resend was then
/// told to pay again). Without a kept answer it is still void.
#[tokio::test]
async fn a_kept_answer_is_evidence_that_a_paid_read_answered() {
    use leasekit_core::store::payment_store::IdentifierKey;
    let w = world().await;
    let t = now_ms();
    let requirements = w.payments.settings.requirements(PRICE);
    let sale = Sale {
        route: "POST /api/v1/lease",
        price: PRICE,
        request_sha256: [0; 32],
    };
    for (nonce, id, kept) in [
        (41u8, "pay_kept_read_000041", true),
        (42, "pay_lost_read_000042", false),
    ] {
        let mut payment = pay(&w.wallet, &requirements, (t / 1000) as u64, [nonce; 32]).unwrap();
        payment.extensions = Some(
            serde_json::json!({"payment-identifier": {"info": {"id": id}}})
                .as_object()
                .unwrap()
                .clone(),
        );
        let paid = w
            .payments
            .accept(Some(Ok(payment)), &sale, t, |_| Evidence::None)
            .await
            .expect("accepted");
        let identifier = IdentifierKey::new(BASE_SEPOLIA, &address_of(&w.wallet).lower(), id);
        assert_eq!(paid.identifier.as_ref(), Some(&identifier));
        if kept {
            w.ledger
                .keep_answer(&identifier, 200, r#"{"data":{}}"#)
                .await
                .unwrap();
        }
    }
    let swept = w.payments.sweep(t + 1_000, now_ms(), 100).await.unwrap();
    assert_eq!((swept.settled, swept.voided), (1, 1), "{swept:?}");
    let statuses = w.statuses().await;
    assert_eq!(
        (statuses[&41].as_str(), statuses[&42].as_str()),
        ("settled", "void")
    );
}

/// `record` put under `key` as a committed call leaves it (a request record alone).
async fn put_record(leases: &LeaseStore, key: &RecordKey, record: StoredRecord, now: Millis) {
    let commit = Commit::Together {
        writes: Vec::new(),
        unchanged: None,
        audit: Vec::new(),
        sessions: Vec::new(),
        record: Some(RecordPut {
            key: key.clone(),
            record,
            over_place: true,
        }),
    };
    let outcome = Rounds::commit(leases, &commit, now).await.unwrap();
    assert_eq!(outcome, Outcome::Committed(None));
}
