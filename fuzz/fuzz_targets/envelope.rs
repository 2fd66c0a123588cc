//! JSON-RPC envelope: any body splits and decodes without panicking, and whatever
//! decodes survives an encode/decode round trip unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use seawall::jsonrpc::{self, Payload};

fuzz_target!(|body: &[u8]| {
    let items = match jsonrpc::split_payload(body) {
        Ok(Payload::Single(raw)) => vec![raw],
        Ok(Payload::Batch(items)) => items,
        Err(_) => return,
    };
    for raw in items {
        let Ok(message) = jsonrpc::decode(raw.get()) else {
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
