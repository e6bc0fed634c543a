//! `batch`: several writes as one transaction, all or none, each answered
//! as its single operation answers (our extension; the reference's adapters
//! have no counterpart).

use std::sync::Arc;

use abi_document_model::{BatchFailure, CollectionSpec, DocumentError, DocumentStore, Write};

use super::{Backend, data, docs};

fn put(collection: &str, id: &str, n: i64, if_version: Option<i64>) -> Write {
    Write::Put {
        namespace: "module".into(),
        collection: collection.into(),
        id: id.into(),
        data: data([("n", n.into())]),
        if_version,
    }
}

fn delete(id: &str, if_version: Option<i64>) -> Write {
    Write::Delete {
        namespace: "module".into(),
        collection: "records".into(),
        id: id.into(),
        if_version,
    }
}

async fn version<S: DocumentStore>(store: &S, id: &str) -> Option<i64> {
    match store.get("module", "records", id).await {
        Ok(doc) => Some(doc.version),
        Err(DocumentError::DocumentNotFound(_)) => None,
        Err(e) => panic!("get {id}: {e}"),
    }
}

/// A batch stores every write or, when one is refused, none, and names the
/// refused write with the single operation's error.
pub async fn batch_writes_all_or_none<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    s.put("module", "records", "a", data([("n", 1.into())]), Some(0))
        .await
        .expect("put a");
    s.put("module", "records", "gone", data([("n", 1.into())]), None)
        .await
        .expect("put gone");

    let answers = s
        .batch(vec![
            put("records", "b", 1, Some(0)),
            put("records", "a", 2, Some(1)),
            delete("gone", Some(1)),
        ])
        .await
        .expect("a batch that holds");
    assert_eq!(answers.len(), 3);
    let b = answers[0].as_ref().expect("b's document");
    assert_eq!((b.id.as_str(), b.version), ("b", 1));
    assert_eq!(b.data, data([("n", 1.into())]));
    let a = answers[1].as_ref().expect("a's document");
    assert_eq!((a.version, &a.data), (2, &data([("n", 2.into())])));
    assert!(answers[2].is_none(), "a delete answers nothing");
    assert_eq!(s.get("module", "records", "a").await.expect("a").version, 2);
    assert_eq!(version(&s, "gone").await, None);

    // A stale compare-and-swap second: the create before it is undone.
    let refused = s
        .batch(vec![
            put("records", "c", 1, Some(0)),
            put("records", "a", 3, Some(1)),
        ])
        .await
        .expect_err("a stale version");
    assert_eq!(refused.index, Some(1));
    assert!(
        matches!(refused.error, DocumentError::VersionConflict(_)),
        "{refused:?}"
    );
    assert_eq!(
        version(&s, "c").await,
        None,
        "nothing of a refused batch stays"
    );
    assert_eq!(version(&s, "a").await, Some(2));

    // A delete at the wrong version, a missing collection, a bad id: each
    // names its write, and nothing before it stays.
    type Expected = fn(&DocumentError) -> bool;
    let cases: [(Write, Expected); 3] = [
        (delete("b", Some(7)), |e| {
            matches!(e, DocumentError::VersionConflict(_))
        }),
        (put("nowhere", "x", 1, None), |e| {
            matches!(e, DocumentError::CollectionNotFound(_))
        }),
        (put("records", "", 1, None), |e| {
            matches!(e, DocumentError::InvalidArgument(_))
        }),
    ];
    for (write, expected) in cases {
        let refused: BatchFailure = s
            .batch(vec![put("records", "d", 1, None), delete("b", None), write])
            .await
            .expect_err("a refused write");
        assert_eq!(refused.index, Some(2), "{refused:?}");
        assert!(expected(&refused.error), "{refused:?}");
        assert_eq!(version(&s, "d").await, None, "{refused:?}");
        assert_eq!(version(&s, "b").await, Some(1), "{refused:?}");
    }
    s.ensure_collection("module", CollectionSpec::new("other"))
        .await
        .expect("ensure other");
    let across = s
        .batch(vec![
            put("records", "e", 1, Some(0)),
            put("other", "e", 1, Some(0)),
        ])
        .await
        .expect("a batch across collections");
    assert_eq!(across.len(), 2);
}

/// Batches racing for one document, each with a document of its own: one
/// wins whole, the others leave nothing (SQLite's writer commits them in
/// one group, each in its own savepoint).
pub async fn racing_batches_have_one_winner_and_leave_nothing_else<B: Backend>(backend: &B) {
    let (_db, s) = docs(backend).await;
    let s = Arc::new(s);
    let racers: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                s.batch(vec![
                    put("records", &format!("own-{i}"), i, Some(0)),
                    put("records", "race", i, Some(0)),
                ])
                .await
            })
        })
        .collect();
    let mut winners = Vec::new();
    for (i, racer) in racers.into_iter().enumerate() {
        match racer.await.expect("racer") {
            Ok(_) => winners.push(i),
            Err(refused) => {
                assert_eq!(refused.index, Some(1), "{refused:?}");
                assert!(matches!(refused.error, DocumentError::VersionConflict(_)));
            }
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    for i in 0..8 {
        let kept = version(&*s, &format!("own-{i}")).await.is_some();
        assert_eq!(kept, winners.contains(&i), "own-{i}");
    }
    let race = s.get("module", "records", "race").await.expect("race");
    assert_eq!(race.data, data([("n", (winners[0] as i64).into())]));
}
