//! Large results an upstream sent before, found again instead of read again.
//!
//! An upstream answers the same list page (`tools/list` of a few hundred tools is tens
//! of kilobytes) again and again, byte for byte; only the envelope around it, with its
//! id, differs. Decoding an answer reads every byte of it, which for such a page is most
//! of what a list call costs. So an upstream keeps its last large results, and an answer
//! that holds one of them is checked by comparing bytes: the result is found in the
//! answer, and the rest of the answer — the envelope with a stand-in where the result
//! was — is decoded on its own. The stand-in occurs nowhere else in that envelope, so
//! when the decoded result is the stand-in, the answer is exactly that envelope with the
//! known result as its `result`: valid JSON-RPC, as the full decoding would have found.
//! Anything else (no known result in it, a different envelope) is decoded in full.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::value::RawValue;

use super::{DecodeError, Message, Response, decode};

/// Smallest result worth remembering: below it, decoding costs less than looking.
const MIN_BYTES: usize = 4096;
/// Largest result remembered.
const MAX_BYTES: usize = 1 << 20;
/// Results remembered per upstream; the oldest goes first.
const MAX_RESULTS: usize = 8;
/// Bytes of a result searched for in an answer before the whole result is compared.
const HEAD: usize = 64;
/// Places in one answer where a known result is compared at most: an answer holds its
/// result once, and an upstream that repeats a result's first bytes all over an answer
/// gets it decoded in full rather than compared at every one of them.
const MAX_PLACES: usize = 4;
/// What stands in for the result in the envelope decoded on its own.
const STAND_INS: [&str; 3] = ["0.1234567890123", "0.9876543210987", "0.5555555555555"];

/// One upstream's last large results.
#[derive(Default)]
pub struct KnownResults {
    /// As decoded before: handing one out again is a copy, not another reading.
    results: Mutex<Vec<Arc<RawValue>>>,
}

impl KnownResults {
    /// Decodes one message like [`decode`], finding a known result instead of reading
    /// it, and remembering a large new one.
    pub fn decode(&self, text: &str) -> Result<Message, DecodeError> {
        if text.len() >= MIN_BYTES
            && let Some(message) = self.find(text)
        {
            return Ok(message);
        }
        let message = decode(text)?;
        if let Message::Response(Response { body: Ok(result), .. }) = &message {
            self.remember(result);
        }
        Ok(message)
    }

    /// The response `text` is, when it carries a known result. The result found becomes
    /// the most recent, so pages answered again and again outlast large results seen
    /// once (a tool's answers) when the oldest is let go.
    fn find(&self, text: &str) -> Option<Message> {
        let known: Vec<Arc<RawValue>> = self.results.lock().clone();
        for result in known.iter().rev() {
            if let Some(message) = around(text, result) {
                let mut results = self.results.lock();
                if let Some(at) = results.iter().position(|r| Arc::ptr_eq(r, result)) {
                    let found = results.remove(at);
                    results.push(found);
                }
                return Some(message);
            }
        }
        None
    }

    fn remember(&self, result: &RawValue) {
        let text = result.get();
        if !(MIN_BYTES..=MAX_BYTES).contains(&text.len()) {
            return;
        }
        let mut results = self.results.lock();
        if results.iter().any(|known| known.get() == text) {
            return;
        }
        if results.len() >= MAX_RESULTS {
            results.remove(0);
        }
        results.push(Arc::from(result.to_owned()));
    }
}

/// `text` as a response whose result is `result`, when it is one: `result` found in it
/// byte for byte, and the rest a response envelope whose result is exactly there.
pub fn around(text: &str, result: &RawValue) -> Option<Message> {
    let (bytes, wanted) = (text.as_bytes(), result.get().as_bytes());
    let head = &wanted[..HEAD.min(wanted.len())];
    for at in memchr::memmem::find_iter(bytes, head).take(MAX_PLACES) {
        let end = at + wanted.len();
        if bytes.get(at..end) != Some(wanted) {
            continue;
        }
        let (Some(before), Some(after)) = (text.get(..at), text.get(end..)) else { continue };
        let Some(stand_in) = STAND_INS.iter().find(|s| !before.contains(*s) && !after.contains(*s)) else {
            continue;
        };
        let envelope = [before, stand_in, after].concat();
        if let Ok(Message::Response(Response { id, body: Ok(found) })) = decode(&envelope)
            && found.get() == *stand_in
        {
            return Some(Message::Response(Response { id, body: Ok(result.to_owned()) }));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    fn page(n: usize) -> String {
        let tools: Vec<String> = (0..n)
            .map(|i| format!(r#"{{"name":"tool_{i}","inputSchema":{{"type":"object","properties":{{"result":{{"type":"number"}}}}}}}}"#))
            .collect();
        format!(r#"{{"tools":[{}]}}"#, tools.join(","))
    }

    fn result_of(message: &Message) -> (String, String) {
        match message {
            Message::Response(Response { id, body: Ok(result) }) => (id.to_string(), result.get().to_owned()),
            other => panic!("not a result: {other:?}"),
        }
    }

    #[test]
    fn a_known_result_is_found_in_any_envelope_and_the_same_as_decoding_it() {
        let known = KnownResults::default();
        let page = page(100);
        let first = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{page}}}"#);
        assert_eq!(result_of(&known.decode(&first).unwrap()), ("1".to_owned(), page.clone()));
        assert_eq!(known.results.lock().len(), 1, "remembered");
        for envelope in [
            format!(r#"{{"jsonrpc":"2.0","id":2,"result":{page}}}"#),
            format!(r#"{{"result":{page},"jsonrpc":"2.0","id":"two"}}"#),
            format!("{{ \"id\" : 3 ,\n \"result\" :{page} , \"jsonrpc\":\"2.0\"}}"),
        ] {
            let fast = around(&envelope, &raw(&page)).expect("found");
            assert_eq!(result_of(&fast), result_of(&decode(&envelope).unwrap()), "{envelope:.60}");
        }
    }

    #[test]
    fn a_known_result_elsewhere_than_the_result_is_not_taken_for_it() {
        let page = page(100);
        // The page under another member, with a small result that looks like a stand-in.
        for envelope in [
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":0.1234567890123,"x":{page}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"wrapped":{page}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"error":{page}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{page},"result":{page}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{page}"#),
            format!(r#"{{"jsonrpc":"1.0","id":1,"result":{page}}}"#),
        ] {
            assert!(around(&envelope, &raw(&page)).is_none(), "{envelope:.80}");
        }
        let known = KnownResults::default();
        known.remember(&raw(&page));
        let nested = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"wrapped":{page}}}}}"#);
        assert_eq!(result_of(&known.decode(&nested).unwrap()).1, format!(r#"{{"wrapped":{page}}}"#));
    }

    #[test]
    fn an_answer_repeating_a_results_first_bytes_is_compared_at_a_few_places_only() {
        // A result of 5,000 `a`s, and an answer whose earlier members repeat its start.
        let result = format!("\"{}\"", "a".repeat(5000));
        let decoy = format!("\"{}\"", "a".repeat(4999));
        let members: Vec<String> = (0..MAX_PLACES).map(|n| format!("\"x{n}\":{decoy}")).collect();
        let text = format!(r#"{{"jsonrpc":"2.0","id":1,{},"result":{result}}}"#, members.join(","));
        assert!(around(&text, &raw(&result)).is_none(), "the real place is past the ones compared");
        let known = KnownResults::default();
        known.remember(&raw(&result));
        assert_eq!(result_of(&known.decode(&text).unwrap()).1, result, "decoded in full instead");
    }

    #[test]
    fn small_results_are_not_remembered_and_the_oldest_goes_first() {
        let known = KnownResults::default();
        known.decode(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#).unwrap();
        assert!(known.results.lock().is_empty());
        for n in 0..=MAX_RESULTS {
            let text = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{}}}"#, page(60 + n));
            known.decode(&text).unwrap();
        }
        let results = known.results.lock();
        assert_eq!(results.len(), MAX_RESULTS);
        assert_eq!(results[0].get(), page(61), "the first one went");
    }

    #[test]
    fn a_result_found_again_outlasts_those_seen_once() {
        let known = KnownResults::default();
        let answer = |n: usize| format!(r#"{{"jsonrpc":"2.0","id":1,"result":{}}}"#, page(n));
        known.decode(&answer(50)).unwrap();
        for n in 0..MAX_RESULTS - 1 {
            known.decode(&answer(60 + n)).unwrap();
        }
        known.decode(&answer(50)).unwrap();
        // One more result seen once lets the oldest go: not the page found again.
        known.decode(&answer(90)).unwrap();
        let results = known.results.lock();
        assert!(results.iter().any(|r| r.get() == page(50)), "the page found again stays");
        assert!(results.iter().all(|r| r.get() != page(60)), "the oldest seen once went");
    }
}
