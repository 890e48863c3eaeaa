//! The mail outbox, run against both backends (`<name>::postgres` and `<name>::sqlite`): a
//! mail is queued with the change that made it and only with it, leased once until its lease
//! ends, retried when its time comes, and forgotten.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{
        AccountToken, AccountTokenPurpose, Email, EventType, InvitableRole, InvitationId,
        NewInvitation, OpenInvitation, OrganizationId, Plan, Role, TokenHash, UserId,
    },
    ports::{QueuedMail, SealedMail, StoreError},
};
use support::{event, mail, now, on_both_backends, Db};
use time::Duration;
use uuid::Uuid;

async fn queued(db: &Db) -> i64 {
    db.count("SELECT COUNT(*) AS n FROM mail_outbox").await
}

/// An invitation of grace@example.com to `organization`, sent now.
fn invitation(organization: OrganizationId, by: UserId) -> NewInvitation {
    let at = now();
    NewInvitation {
        id: InvitationId::from_uuid(Uuid::now_v7()),
        organization_id: organization,
        email: Email::parse("grace@example.com").unwrap(),
        role: InvitableRole::new(Role::Member).unwrap(),
        token_hash: TokenHash::of(&Uuid::new_v4().to_string()),
        invited_by: by,
        invited_at: at,
        expires_at: NewInvitation::expiry(at),
        open: OpenInvitation::Kept,
    }
}

#[on_both_backends]
async fn an_invitation_s_mail_is_queued_with_it_and_not_without_it(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Free).await;
    let sealed = mail();
    db.store
        .create_invitation(
            invitation(acme, ada),
            event(EventType::MemberInvited, Some(acme), Some(ada)),
            support::signed_in(),
            sealed.clone(),
        )
        .await
        .unwrap();
    assert_eq!(queued(&db).await, 1);
    // A second live invitation of the address is refused: its mail is not queued either.
    let refused = db
        .store
        .create_invitation(
            invitation(acme, ada),
            event(EventType::MemberInvited, Some(acme), Some(ada)),
            support::signed_in(),
            mail(),
        )
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict)), "{refused:?}");
    assert_eq!(queued(&db).await, 1, "the refused change queued nothing");
    let leased = db
        .store
        .lease_mail(now(), now() + Duration::minutes(5), 16)
        .await
        .unwrap();
    assert_eq!(
        leased,
        vec![QueuedMail {
            mail: sealed,
            attempts: 0
        }]
    );
}

#[on_both_backends]
async fn a_mailed_link_s_mail_is_queued_with_its_token(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let at = now();
    db.store
        .save_account_token(
            TokenHash::of("link"),
            AccountToken {
                purpose: AccountTokenPurpose::MagicLink,
                user_id: ada,
                email: Email::parse("ada@example.com").unwrap(),
                created_at: at,
                expires_at: at + Duration::minutes(15),
            },
            support::signed_in(),
            mail(),
        )
        .await
        .unwrap();
    assert_eq!(queued(&db).await, 1);
}

#[on_both_backends]
async fn a_leased_mail_is_not_leased_again_until_its_lease_ends(db: Db) {
    let t0 = now();
    let (first, second) = (mail(), mail());
    db.store.queue_mail(first.clone(), t0).await.unwrap();
    db.store
        .queue_mail(second.clone(), t0 + Duration::seconds(1))
        .await
        .unwrap();
    let until = t0 + Duration::minutes(5);
    let leased = db.store.lease_mail(t0, until, 16).await.unwrap();
    assert_eq!(
        ids(&leased),
        vec![first.id],
        "only what is due, oldest first"
    );
    let later = t0 + Duration::seconds(2);
    let leased = db.store.lease_mail(later, until, 16).await.unwrap();
    assert_eq!(
        ids(&leased),
        vec![second.id],
        "the first is held by its lease"
    );
    assert!(db
        .store
        .lease_mail(later, until, 16)
        .await
        .unwrap()
        .is_empty());
    // A worker that died: its mails are due again when the lease ends.
    let leased = db
        .store
        .lease_mail(until, until + Duration::minutes(5), 1)
        .await
        .unwrap();
    assert_eq!(
        ids(&leased),
        vec![first.id],
        "at most the limit, oldest first"
    );
}

#[on_both_backends]
async fn a_retried_mail_keeps_its_attempts_and_waits_for_its_time_and_a_forgotten_one_is_gone(
    db: Db,
) {
    let t0 = now();
    let sealed = mail();
    db.store.queue_mail(sealed.clone(), t0).await.unwrap();
    db.store
        .lease_mail(t0, t0 + Duration::minutes(5), 16)
        .await
        .unwrap();
    let retry_at = t0 + Duration::seconds(10);
    db.store.retry_mail(sealed.id, 1, retry_at).await.unwrap();
    let early = retry_at - Duration::seconds(1);
    assert!(db
        .store
        .lease_mail(early, early, 16)
        .await
        .unwrap()
        .is_empty());
    let leased = db
        .store
        .lease_mail(retry_at, retry_at + Duration::minutes(5), 16)
        .await
        .unwrap();
    assert_eq!(
        leased,
        vec![QueuedMail {
            mail: sealed.clone(),
            attempts: 1
        }]
    );
    db.store.forget_mail(sealed.id).await.unwrap();
    assert_eq!(queued(&db).await, 0);
    // Forgetting again (an outcome recorded twice) is no error.
    db.store.forget_mail(sealed.id).await.unwrap();
}

fn ids(leased: &[QueuedMail]) -> Vec<Uuid> {
    leased.iter().map(|queued| queued.mail.id).collect()
}

#[on_both_backends]
async fn the_sealed_bytes_come_back_as_they_went_in(db: Db) {
    let sealed = SealedMail {
        id: Uuid::now_v7(),
        sealed: (0..=255).collect(),
    };
    db.store.queue_mail(sealed.clone(), now()).await.unwrap();
    let leased = db
        .store
        .lease_mail(now(), now() + Duration::minutes(5), 16)
        .await
        .unwrap();
    assert_eq!(leased[0].mail, sealed);
}
