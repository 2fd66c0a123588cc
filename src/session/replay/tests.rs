use std::time::Duration;

use super::*;

fn limits(messages: usize) -> ReplayBufferConfig {
    ReplayBufferConfig { messages, bytes: 1 << 20 }
}

/// The id and data of an encoded event.
fn parse(frame: &Bytes) -> (String, String) {
    let text = String::from_utf8_lossy(frame);
    let id = text.lines().find_map(|l| l.strip_prefix("id: ")).unwrap_or_default().to_owned();
    let data = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    (id, data)
}

async fn next(reader: &mut Reader) -> Option<(String, String)> {
    tokio::time::timeout(Duration::from_secs(5), reader.next()).await.expect("an event or the end").map(|f| parse(&f))
}

fn seq_of(id: &str) -> u64 {
    id.parse::<EventId>().unwrap().seq
}

#[tokio::test]
async fn a_dropped_reader_is_resumed_with_exactly_the_rest_then_the_stream_ends() {
    let streams = Streams::default();
    let stream = streams.open_post(limits(16));
    let mut first = stream.attach(Start::Fresh { prime: true }, false).unwrap();
    let (primed, data) = next(&mut first).await.unwrap();
    assert_eq!(data, "", "the priming event carries no data");
    assert_eq!(primed, format!("{}-1", stream.id()));
    stream.push("p1".into()).await;
    stream.push("p2".into()).await;
    let (seen, data) = next(&mut first).await.unwrap();
    assert_eq!(data, "p1");
    drop(first);
    assert!(!stream.is_attached());
    // Nobody reads: the rest and the answer are kept.
    stream.push("p3".into()).await;
    stream.finish(Some("answer".into())).await;
    assert!(stream.is_finished());

    let found = streams.post(stream.id()).expect("kept for a resume");
    let mut resumed = found.attach(Start::After(seq_of(&seen)), true).unwrap();
    let mut rest = Vec::new();
    while let Some((id, data)) = next(&mut resumed).await {
        rest.push(data);
        assert!(id.starts_with(&format!("{}-", stream.id())));
    }
    assert_eq!(rest, ["p2", "p3", "answer"]);
    drop(resumed);
    assert!(streams.post(stream.id()).is_none(), "released once its answer was sent");
    assert_eq!(streams.posts(), 0);
}

#[tokio::test]
async fn a_resume_takes_the_stream_over_and_a_plain_reader_does_not() {
    let streams = Streams::default();
    let (stream, made) = streams.get_stream(limits(16));
    assert!(made);
    assert!(!streams.get_stream(limits(16)).1, "one GET stream per session");
    let mut old = stream.attach(Start::Fresh { prime: false }, false).unwrap();
    assert_eq!(stream.attach(Start::Fresh { prime: false }, false).unwrap_err(), AttachError::Busy);
    stream.push("a".into()).await;
    let (id, _) = next(&mut old).await.unwrap();
    let mut new = stream.attach(Start::After(seq_of(&id)), true).unwrap();
    assert_eq!(next(&mut old).await, None, "the old connection ends");
    stream.push("b".into()).await;
    assert_eq!(next(&mut new).await.map(|e| e.1), Some("b".into()));
    drop(old);
    assert!(stream.is_attached(), "dropping the old reader leaves the new one attached");
}

#[tokio::test]
async fn a_position_the_buffer_no_longer_covers_is_not_resumable() {
    let streams = Streams::default();
    let (stream, _) = streams.get_stream(limits(2));
    let mut reader = stream.attach(Start::Fresh { prime: false }, false).unwrap();
    let mut ids = Vec::new();
    for i in 0..4 {
        stream.push(format!("m{i}")).await;
        ids.push(next(&mut reader).await.unwrap().0);
    }
    drop(reader);
    assert_eq!(stream.attach(Start::After(seq_of(&ids[0])), true).unwrap_err(), AttachError::NotResumable);
    assert_eq!(stream.attach(Start::After(99), true).unwrap_err(), AttachError::NotResumable, "never reached");
    let mut resumed = stream.attach(Start::After(seq_of(&ids[1])), true).unwrap();
    assert_eq!(next(&mut resumed).await.map(|e| e.1), Some("m2".into()));
    assert_eq!(next(&mut resumed).await.map(|e| e.1), Some("m3".into()));
    assert_eq!(stream.held().0, 2);
}

#[tokio::test]
async fn producers_keep_the_pace_of_an_attached_reader_only() {
    let streams = Streams::default();
    let stream = streams.open_post(limits(2));
    // Nobody reads: pushes never wait, the oldest give way.
    for i in 0..5 {
        tokio::time::timeout(Duration::from_secs(1), stream.push(format!("m{i}"))).await.expect("no wait");
    }
    assert_eq!(stream.held().0, 2);
    let mut reader = stream.attach(Start::Fresh { prime: false }, false).unwrap();
    let blocked = tokio::time::timeout(Duration::from_millis(100), stream.push("m5".into())).await;
    assert!(blocked.is_err(), "a full queue waits for the reader");
    let producer = {
        let stream = Arc::clone(&stream);
        tokio::spawn(async move { stream.push("m6".into()).await })
    };
    assert_eq!(next(&mut reader).await.map(|e| e.1), Some("m3".into()));
    tokio::time::timeout(Duration::from_secs(5), producer).await.expect("room made").unwrap();
    assert_eq!(next(&mut reader).await.map(|e| e.1), Some("m4".into()));
    assert_eq!(next(&mut reader).await.map(|e| e.1), Some("m6".into()));
}

#[tokio::test]
async fn finished_streams_nobody_reads_are_bounded_per_session() {
    let streams = Streams::default();
    let mut ids = Vec::new();
    for i in 0..RETAINED_FINISHED + 4 {
        let stream = streams.open_post(limits(4));
        stream.finish(Some(format!("answer {i}"))).await;
        ids.push(stream.id());
    }
    streams.open_post(limits(4));
    assert_eq!(streams.posts(), RETAINED_FINISHED + 1, "the retained ones and the open one");
    assert!(streams.post(ids[0]).is_none(), "the oldest went first");
    assert!(streams.post(ids[ids.len() - 1]).is_some());
    streams.clear();
    assert_eq!(streams.posts(), 0);
}

#[test]
fn priming_starts_with_2025_11_25() {
    assert!(primes("2025-11-25"));
    assert!(!primes("2025-06-18"));
    assert!(!primes("2025-03-26"));
}
