//! JSON-RPC envelope: any body splits and decodes without panicking, and whatever
//! decodes survives an encode/decode round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::jsonrpc::{self, Payload};

fuzz_target!(|body: &[u8]| {
    let items: Vec<&str> = match jsonrpc::split_payload(body) {
        Ok(Payload::Single(text)) => vec![text],
        Ok(Payload::Batch(items)) => items.into_iter().map(|raw| raw.get()).collect(),
        Err(_) => return,
    };
    for text in items {
        let Ok(message) = jsonrpc::decode(text) else {
            continue;
        };
        let encoded = jsonrpc::encode(&message);
        let again = match jsonrpc::decode(&encoded) {
            Ok(again) => again,
            Err(e) => panic!("re-encoded message does not decode: {e}\n{encoded}"),
        };
        assert_eq!(jsonrpc::encode(&again), encoded, "round trip changed the message");
    }
});
