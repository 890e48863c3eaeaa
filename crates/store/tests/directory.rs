//! The directory's listings, run against both backends (`<name>::postgres` and
//! `<name>::sqlite`): SCIM filters the store answers with its indexes (`eq`, `sw`, `co`, `pr`
//! on `userName`, `externalId`, `displayName` and addresses, with `and` and `or`), under
//! SCIM's case rules, paged in SQL with the total; the reads in order that a filter the store
//! cannot answer goes through; and the targeted reads a group's write makes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{
        DirectoryAttribute, DirectoryCursor, DirectoryEmail, DirectoryFilter, DirectoryGroup,
        DirectoryName, DirectoryText, DirectoryUser, DirectoryUserId, GroupAttributes,
        OrganizationId, Plan, Slice, TextMatch,
    },
    ports::{DirectoryChange, DirectoryWrite, GroupMembers},
};
use support::{now, on_both_backends, Db};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use DirectoryAttribute::{DisplayName, Email, ExternalId, UserName};
use TextMatch::{Contains, Equals, StartsWith};

fn text(value: &str) -> DirectoryText {
    DirectoryText::parse(value).unwrap()
}

fn user(
    org: OrganizationId,
    user_name: &str,
    external_id: Option<&str>,
    display_name: Option<&str>,
    emails: &[&str],
    at: OffsetDateTime,
) -> DirectoryUser {
    DirectoryUser {
        id: Uuid::now_v7().into(),
        organization_id: org,
        attributes: gatehouse_domain::model::UserAttributes {
            user_name: text(user_name),
            external_id: external_id.map(text),
            display_name: display_name.map(text),
            name: DirectoryName::default(),
            emails: emails
                .iter()
                .map(|value| DirectoryEmail {
                    value: text(value),
                    kind: None,
                    primary: false,
                })
                .collect(),
            active: true,
        },
        created_at: at,
        updated_at: at,
    }
}

fn group(
    org: OrganizationId,
    name: &str,
    external_id: Option<&str>,
    members: &[DirectoryUserId],
    at: OffsetDateTime,
) -> DirectoryGroup {
    DirectoryGroup {
        id: Uuid::now_v7().into(),
        organization_id: org,
        attributes: GroupAttributes {
            display_name: text(name),
            external_id: external_id.map(text),
            members: members.to_vec(),
        }
        .normalized(),
        created_at: at,
        updated_at: at,
    }
}

async fn write(db: &Db, org: OrganizationId, changes: Vec<DirectoryChange>) {
    let written = db
        .store
        .write_directory(DirectoryWrite {
            organization_id: org,
            at: now(),
            changes,
            effects: Vec::new(),
            events: Vec::new(),
            audit: Vec::new(),
            mails: Vec::new(),
        })
        .await
        .unwrap();
    assert!(written);
}

/// Acme's directory (and a neighbour's user, who must never show): Ada, Bob, Carol, Åsa and
/// `a_b%c`, provisioned in this order (the last two at the same instant).
struct Acme {
    org: OrganizationId,
    users: Vec<DirectoryUser>,
    neighbour: DirectoryUser,
}

async fn acme(db: &Db) -> Acme {
    let owner = db.registered("owner@acme.test").await;
    let org = db.team(owner, "acme", Plan::Business).await;
    let globex = db.team(owner, "globex", Plan::Business).await;
    let t0 = now();
    let at = |seconds: i64| t0 + Duration::seconds(seconds);
    let users = vec![
        user(
            org,
            "Ada.Lovelace@Acme.test",
            Some("00uAda"),
            Some("Ada Lovelace"),
            &["ada@acme.test", "ADA@Home.test"],
            at(1),
        ),
        user(org, "bob@acme.test", Some("00ubob"), None, &[], at(2)),
        user(
            org,
            "carol@globex.test",
            None,
            Some("Carol Ω"),
            &["carol@acme.test"],
            at(3),
        ),
        user(org, "ÅSA@acme.test", None, None, &["asa@acme.test"], at(4)),
        user(org, "a_b%c@acme.test", None, None, &[], at(4)),
    ];
    let changes = users
        .iter()
        .map(|user| DirectoryChange::CreateUser(user.clone()))
        .collect();
    write(db, org, changes).await;
    let neighbour = user(
        globex,
        "ada.lovelace@acme.test",
        Some("00uAda"),
        Some("Ada Lovelace"),
        &["ada@acme.test"],
        at(0),
    );
    write(
        db,
        globex,
        vec![DirectoryChange::CreateUser(neighbour.clone())],
    )
    .await;
    Acme {
        org,
        users,
        neighbour,
    }
}

impl Acme {
    /// The userNames of the users the filter selects, in the listing's order, and the total.
    async fn find(&self, db: &Db, filter: DirectoryFilter) -> (Vec<String>, u64) {
        self.page(db, filter, Slice::new(0, 100)).await
    }

    async fn page(&self, db: &Db, filter: DirectoryFilter, slice: Slice) -> (Vec<String>, u64) {
        let page = db
            .store
            .directory_users_page(self.org, filter, slice)
            .await
            .unwrap();
        let names = page
            .resources
            .iter()
            .map(|user| user.attributes.user_name.as_str().to_owned())
            .collect();
        (names, page.total)
    }

    /// What a listing of these users finds: their userNames in order, and how many.
    fn want(&self, which: &[usize]) -> (Vec<String>, u64) {
        let names = self.in_order(which);
        let total = names.len() as u64;
        (names, total)
    }

    /// The userNames in the listing's order (the last two were provisioned at the same instant:
    /// by id).
    fn in_order(&self, which: &[usize]) -> Vec<String> {
        let mut users: Vec<&DirectoryUser> = which.iter().map(|i| &self.users[*i]).collect();
        users.sort_by_key(|user| (user.created_at, user.id));
        users
            .iter()
            .map(|user| user.attributes.user_name.as_str().to_owned())
            .collect()
    }
}

fn cmp(attribute: DirectoryAttribute, how: TextMatch, operand: &str) -> DirectoryFilter {
    DirectoryFilter::compare(attribute, how, operand)
}

#[on_both_backends(worker_threads = 4)]
async fn user_names_compare_without_case_by_equality_prefix_and_part(db: Db) {
    let acme = acme(&db).await;
    let want = |which: &[usize]| acme.want(which);
    assert_eq!(
        acme.find(&db, cmp(UserName, Equals, "ada.lovelace@ACME.TEST"))
            .await,
        want(&[0])
    );
    assert_eq!(
        acme.find(&db, cmp(UserName, Equals, "ada.lovelace@acme"))
            .await,
        want(&[])
    );
    // Unicode's lowercase, as Rust folds it, on both databases.
    assert_eq!(
        acme.find(&db, cmp(UserName, Equals, "åsa@ACME.test")).await,
        want(&[3])
    );
    assert_eq!(
        acme.find(&db, cmp(UserName, StartsWith, "B")).await,
        want(&[1])
    );
    assert_eq!(
        acme.find(&db, cmp(UserName, StartsWith, "a")).await,
        want(&[0, 4])
    );
    assert_eq!(
        acme.find(&db, cmp(UserName, Contains, "@ACME.")).await,
        want(&[0, 1, 3, 4])
    );
    // LIKE's wildcards in the text stand for themselves.
    assert_eq!(
        acme.find(&db, cmp(UserName, Contains, "_")).await,
        want(&[4])
    );
    assert_eq!(
        acme.find(&db, cmp(UserName, Contains, "b%c")).await,
        want(&[4])
    );
    assert_eq!(
        acme.find(&db, cmp(UserName, StartsWith, "a_")).await,
        want(&[4])
    );
    assert_eq!(
        acme.find(&db, DirectoryFilter::Present(UserName)).await,
        want(&[0, 1, 2, 3, 4])
    );
}

#[on_both_backends(worker_threads = 4)]
async fn external_ids_compare_with_case(db: Db) {
    let acme = acme(&db).await;
    let want = |which: &[usize]| acme.want(which);
    assert_eq!(
        acme.find(&db, cmp(ExternalId, Equals, "00uAda")).await,
        want(&[0])
    );
    assert_eq!(
        acme.find(&db, cmp(ExternalId, Equals, "00uada")).await,
        want(&[])
    );
    assert_eq!(
        acme.find(&db, cmp(ExternalId, StartsWith, "00u")).await,
        want(&[0, 1])
    );
    assert_eq!(
        acme.find(&db, cmp(ExternalId, StartsWith, "00uA")).await,
        want(&[0])
    );
    assert_eq!(
        acme.find(&db, cmp(ExternalId, Contains, "Ada")).await,
        want(&[0])
    );
    // SQLite's LIKE ignores ASCII case: the store must not.
    assert_eq!(
        acme.find(&db, cmp(ExternalId, Contains, "ada")).await,
        want(&[])
    );
    assert_eq!(
        acme.find(&db, cmp(ExternalId, Contains, "UB")).await,
        want(&[])
    );
    assert_eq!(
        acme.find(&db, DirectoryFilter::Present(ExternalId)).await,
        want(&[0, 1])
    );
}

#[on_both_backends(worker_threads = 4)]
async fn display_names_and_addresses_compare_without_case(db: Db) {
    let acme = acme(&db).await;
    let want = |which: &[usize]| acme.want(which);
    assert_eq!(
        acme.find(&db, cmp(DisplayName, Equals, "ada LOVELACE"))
            .await,
        want(&[0])
    );
    assert_eq!(
        acme.find(&db, cmp(DisplayName, Contains, "ω")).await,
        want(&[2])
    );
    assert_eq!(
        acme.find(&db, cmp(DisplayName, StartsWith, "CAR")).await,
        want(&[2])
    );
    assert_eq!(
        acme.find(&db, DirectoryFilter::Present(DisplayName)).await,
        want(&[0, 2])
    );
    // Any of a user's addresses; the user once.
    assert_eq!(
        acme.find(&db, cmp(Email, Equals, "ada@home.TEST")).await,
        want(&[0])
    );
    assert_eq!(
        acme.find(&db, cmp(Email, Contains, "@ACME")).await,
        want(&[0, 2, 3])
    );
    assert_eq!(
        acme.find(&db, cmp(Email, StartsWith, "a")).await,
        want(&[0, 3])
    );
    assert_eq!(
        acme.find(&db, DirectoryFilter::Present(Email)).await,
        want(&[0, 2, 3])
    );
}

#[on_both_backends(worker_threads = 4)]
async fn filters_combine_and_stay_in_their_organization(db: Db) {
    let acme = acme(&db).await;
    let want = |which: &[usize]| acme.want(which);
    let a_or_c = cmp(UserName, StartsWith, "a").or(cmp(UserName, StartsWith, "c"));
    assert_eq!(acme.find(&db, a_or_c.clone()).await, want(&[0, 2, 4]));
    let named = a_or_c.and(DirectoryFilter::Present(DisplayName));
    assert_eq!(acme.find(&db, named).await, want(&[0, 2]));
    let either = cmp(Email, Equals, "asa@acme.test").or(cmp(ExternalId, Equals, "00ubob"));
    assert_eq!(acme.find(&db, either).await, want(&[1, 3]));
    let ada = &acme.users[0];
    assert_eq!(
        acme.find(&db, DirectoryFilter::Id(ada.id.as_uuid())).await,
        want(&[0])
    );
    // The neighbour's Ada, by every attribute: never in Acme's listing.
    let theirs = DirectoryFilter::Id(acme.neighbour.id.as_uuid());
    assert_eq!(acme.find(&db, theirs).await, want(&[]));
    assert_eq!(acme.find(&db, DirectoryFilter::Nothing).await, want(&[]));
    assert_eq!(
        acme.find(&db, DirectoryFilter::All).await,
        want(&[0, 1, 2, 3, 4])
    );
}

#[on_both_backends(worker_threads = 4)]
async fn pages_are_slices_of_the_listing_with_its_total(db: Db) {
    let acme = acme(&db).await;
    let all = acme.in_order(&[0, 1, 2, 3, 4]);
    let page = |offset, limit| acme.page(&db, DirectoryFilter::All, Slice::new(offset, limit));
    assert_eq!(page(1, 2).await, (all[1..3].to_vec(), 5));
    // Near the end (read from the end): the same rows, in order.
    assert_eq!(page(3, 10).await, (all[3..].to_vec(), 5));
    assert_eq!(page(4, 1).await, (all[4..].to_vec(), 5));
    assert_eq!(page(5, 10).await, (Vec::new(), 5));
    // count=0: the total alone.
    assert_eq!(page(0, 0).await, (Vec::new(), 5));
    let filtered = acme
        .page(&db, cmp(UserName, Contains, "acme"), Slice::new(1, 2))
        .await;
    assert_eq!(filtered, (acme.in_order(&[1, 3]), 4));
}

#[on_both_backends(worker_threads = 4)]
async fn a_replaced_or_deleted_user_is_found_by_what_it_has_now(db: Db) {
    let acme = acme(&db).await;
    let mut ada = acme.users[0].clone();
    ada.attributes.emails = vec![DirectoryEmail {
        value: text("Countess@Acme.test"),
        kind: None,
        primary: true,
    }];
    ada.attributes.display_name = None;
    write(
        &db,
        acme.org,
        vec![DirectoryChange::ReplaceUser(ada.clone())],
    )
    .await;
    assert_eq!(
        acme.find(&db, cmp(Email, Equals, "ada@acme.test")).await.1,
        0
    );
    assert_eq!(
        acme.find(&db, cmp(Email, Equals, "countess@acme.test"))
            .await
            .1,
        1
    );
    assert_eq!(acme.find(&db, cmp(DisplayName, Contains, "ada")).await.1, 0);
    write(&db, acme.org, vec![DirectoryChange::DeleteUser(ada.id)]).await;
    assert_eq!(acme.find(&db, cmp(Email, Contains, "countess")).await.1, 0);
    assert_eq!(
        db.count("SELECT count(*) AS n FROM scim_user_emails").await,
        3,
        "Carol's, Åsa's and the neighbour's"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn the_directory_is_read_in_order_in_batches_and_by_ids(db: Db) {
    let acme = acme(&db).await;
    let mut read = Vec::new();
    let mut after: Option<DirectoryCursor> = None;
    loop {
        let batch = db
            .store
            .directory_users_after(acme.org, after, 2)
            .await
            .unwrap();
        if let Some(last) = batch.last() {
            after = Some(DirectoryCursor {
                created_at: last.created_at,
                id: last.id.as_uuid(),
            });
        }
        let done = batch.len() < 2;
        read.extend(
            batch
                .into_iter()
                .map(|user| user.attributes.user_name.as_str().to_owned()),
        );
        if done {
            break;
        }
    }
    assert_eq!(
        read,
        acme.in_order(&[0, 1, 2, 3, 4]),
        "each once, ties by id"
    );

    let ids = vec![acme.users[1].id, acme.neighbour.id, Uuid::now_v7().into()];
    let found = db
        .store
        .directory_users_with_ids(acme.org, ids)
        .await
        .unwrap();
    assert_eq!(found, vec![acme.users[1].clone()]);
}

#[on_both_backends(worker_threads = 4)]
async fn groups_are_filtered_and_paged_with_their_members_only_when_asked(db: Db) {
    let acme = acme(&db).await;
    let t0 = now();
    let (ada, bob, carol) = (acme.users[0].id, acme.users[1].id, acme.users[2].id);
    let engineering = group(acme.org, "Engineering", Some("G-Eng"), &[ada, bob], t0);
    let sales = group(
        acme.org,
        "Sales Ω",
        None,
        &[carol],
        t0 + Duration::seconds(1),
    );
    write(
        &db,
        acme.org,
        vec![
            DirectoryChange::CreateGroup(engineering.clone()),
            DirectoryChange::CreateGroup(sales.clone()),
        ],
    )
    .await;
    let find = |filter: DirectoryFilter, members: GroupMembers| {
        let store = db.store.clone();
        let org = acme.org;
        async move {
            let page = store
                .directory_groups_page(org, filter, Slice::new(0, 100), members)
                .await
                .unwrap();
            (page.resources, page.total)
        }
    };
    let (found, total) = find(cmp(DisplayName, Equals, "ENGINEERING"), GroupMembers::Read).await;
    assert_eq!((found, total), (vec![engineering.clone()], 1));
    let (found, _) = find(cmp(DisplayName, Contains, "ω"), GroupMembers::Skipped).await;
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].id, sales.id);
    assert!(found[0].attributes.members.is_empty(), "members left out");
    assert_eq!(
        find(cmp(ExternalId, Equals, "g-eng"), GroupMembers::Read)
            .await
            .1,
        0
    );
    assert_eq!(
        find(cmp(ExternalId, StartsWith, "G-"), GroupMembers::Read)
            .await
            .1,
        1
    );
    assert_eq!(
        find(DirectoryFilter::Present(ExternalId), GroupMembers::Read)
            .await
            .1,
        1
    );
    // A user's attributes are no group's.
    assert_eq!(
        find(cmp(UserName, Contains, "a"), GroupMembers::Read)
            .await
            .1,
        0
    );
    assert_eq!(
        find(DirectoryFilter::Present(Email), GroupMembers::Read)
            .await
            .1,
        0
    );
    let (found, total) = find(DirectoryFilter::All, GroupMembers::Read).await;
    assert_eq!(
        (found, total),
        (vec![engineering.clone(), sales.clone()], 2)
    );
    let page = db
        .store
        .directory_groups_page(
            acme.org,
            DirectoryFilter::All,
            Slice::new(1, 1),
            GroupMembers::Read,
        )
        .await
        .unwrap();
    assert_eq!((page.resources, page.total), (vec![sales.clone()], 2));

    // The groups of some users: what a group's write reads instead of the directory.
    let mut of = db
        .store
        .groups_of_users(acme.org, vec![ada, carol, acme.users[3].id])
        .await
        .unwrap();
    of.sort_by_key(|g| g.user_id);
    let mut want = vec![
        (ada, engineering.id, "Engineering"),
        (carol, sales.id, "Sales Ω"),
    ];
    want.sort_by_key(|w| w.0);
    let got: Vec<_> = of
        .iter()
        .map(|g| (g.user_id, g.group_id, g.display_name.as_str()))
        .collect();
    assert_eq!(got, want);

    let batch = db
        .store
        .directory_groups_after(acme.org, None, 10, GroupMembers::Skipped)
        .await
        .unwrap();
    assert_eq!(batch.len(), 2);
    assert!(batch.iter().all(|g| g.attributes.members.is_empty()));
}
