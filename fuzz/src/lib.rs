//! Helpers shared by the fuzz targets: how an input is read as a stream and the points at
//! which it is split.
//!
//! The stream targets take two header bytes before the stream itself: a knob (the limit,
//! scaled by each target) and a seed that picks how the stream is cut into chunks. So a
//! seed file is `printf '\x40\x07'` followed by a real stream, and every mutation of the
//! two bytes tries another limit or another chunking of the same bytes.

/// A stream input: the target's knob, the chunking seed and the bytes.
pub struct Input<'a> {
    /// Scaled by the target into a limit.
    pub knob: u8,
    /// Chooses the chunk sizes (see [`chunk_sizes`]).
    pub seed: u8,
    /// The stream.
    pub body: &'a [u8],
}

impl<'a> Input<'a> {
    /// Splits off the two header bytes; `None` for shorter inputs.
    pub fn parse(data: &'a [u8]) -> Option<Input<'a>> {
        match data {
            [knob, seed, body @ ..] => Some(Input { knob: *knob, seed: *seed, body }),
            _ => None,
        }
    }
}

/// Chunk sizes that cover `len` bytes, drawn from `seed`: its low three bits choose the
/// largest chunk (1, 2, 3, 7, 16, 61, 256 or 4096 bytes; so one seed in eight cuts between
/// every two bytes), the rest seed a xorshift generator. Zero never occurs.
pub fn chunk_sizes(seed: u8, len: usize) -> Vec<usize> {
    const LARGEST: [usize; 8] = [1, 2, 3, 7, 16, 61, 256, 4096];
    let largest = LARGEST[usize::from(seed & 7)];
    let mut state = u32::from(seed).wrapping_mul(0x9e37_79b9) | 1;
    let mut sizes = Vec::new();
    let mut covered = 0;
    while covered < len {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let size = 1 + state as usize % largest;
        sizes.push(size.min(len - covered));
        covered += size;
    }
    sizes
}

/// `body` cut into consecutive pieces of the given sizes.
pub fn split<'a>(body: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut rest = body;
    let mut pieces = Vec::with_capacity(sizes.len());
    for &size in sizes {
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        pieces.push(piece);
        rest = tail;
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}
