//! The binary's global allocator: mimalloc, asked the way its own aligned entry points
//! would ask it when the alignment is one every block has.
//!
//! mimalloc keeps a heap per thread: the glibc allocator's arenas serialise the worker
//! threads under load and cost a fifth of the CPU of a proxied call. The `mimalloc`
//! crate's allocator passes every request to `mi_malloc_aligned` with the layout's
//! alignment, whose fast path covers only blocks up to 1 KiB with a suitably aligned
//! free block at hand; every other request (a request's boxed futures are 1.5 to 3 KiB)
//! goes through the generic aligned path, which checks the alignment once more and then
//! makes the plain allocation. Here a layout whose alignment is at most 16 bytes and at
//! most its size — which mimalloc guarantees for every block
//! (`mi_malloc_is_naturally_aligned`) — is a plain `mi_malloc`, `mi_zalloc` or
//! `mi_realloc`; any other goes to the aligned entry points as before.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The largest alignment every mimalloc block of at least that size has
/// (`MI_MAX_ALIGN_SIZE`, the alignment of `max_align_t`).
const BLOCK_ALIGN: usize = 16;

/// mimalloc, plain where the alignment allows (see the module's documentation).
pub struct Allocator;

/// Whether a plain allocation of `size` bytes is aligned to `align`.
#[inline]
fn plain(size: usize, align: usize) -> bool {
    align <= BLOCK_ALIGN && align <= size
}

/// A block for `layout` from `plain` where every block has its alignment, else from
/// `aligned` (the same allocation's aligned entry point).
///
/// # Safety
///
/// `layout` has a non-zero size, as `GlobalAlloc::alloc` requires.
#[inline]
unsafe fn allocate(
    layout: Layout,
    plain_entry: unsafe extern "C" fn(usize) -> *mut c_void,
    aligned_entry: unsafe extern "C" fn(usize, usize) -> *mut c_void,
) -> *mut u8 {
    // SAFETY: FFI calls with a size and a power-of-two alignment from a `Layout`.
    unsafe {
        if plain(layout.size(), layout.align()) {
            plain_entry(layout.size()).cast()
        } else {
            aligned_entry(layout.size(), layout.align()).cast()
        }
    }
}

// SAFETY: every block comes from mimalloc and goes back to it (`mi_free` takes blocks of
// the plain and the aligned entry points alike); a plain block is used only where
// mimalloc guarantees its alignment (`plain`), and the aligned entry points honour any
// other.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: `layout` comes from the caller of `alloc`, as `allocate` needs.
        unsafe { allocate(layout, mi::mi_malloc, mi::mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe { allocate(layout, mi::mi_zalloc, mi::mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` was allocated by this allocator, so by mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` was allocated by this allocator with `layout`; the new block keeps
        // its alignment (plain only where every block of `new_size` has it).
        unsafe {
            if plain(new_size, layout.align()) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_their_layout_asks_for() {
        let allocator = Allocator;
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in [1, 7, 8, 15, 16, 24, 40, 100, 1000, 1500, 3000, 70_000] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; each block is written within its size, then
                // grown, checked and freed with the layout it has.
                unsafe {
                    let p = allocator.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size}, align {align}");
                    p.write_bytes(0xa5, size);
                    let grown = allocator.realloc(p, layout, size * 3);
                    assert_eq!(grown as usize % align, 0, "grown from {size}, align {align}");
                    assert_eq!(*grown.add(size - 1), 0xa5);
                    allocator.dealloc(grown, Layout::from_size_align(size * 3, align).unwrap());
                    let z = allocator.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!(std::slice::from_raw_parts(z, size).iter().all(|b| *b == 0));
                    allocator.dealloc(z, layout);
                }
            }
        }
    }
}
