//! The component's allocator: small requests by size class
//! (`small_blocks.rs`), the rest by Rust's own (dlmalloc), started on the
//! pages the module's initial memory already has above its data, instead
//! of on pages grown from nothing.
//!
//! Why: a host that takes a fresh instance per call from a pooling
//! allocator (our operator, Kubewarden-style hosts) pays for every
//! `memory.grow` twice, in `mprotect` calls that make the new pages
//! accessible and, when the pooled slot is reused, inaccessible again;
//! with more than one host thread each also flushes every core's TLB.
//! Those calls were about half the cost of a fresh instance. The build
//! links the module with an initial memory that holds a reconcile's heap
//! (scripts/build-wasm.sh), so a call grows memory only for unusually
//! large input; untouched initial pages cost a pooling host nothing.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32;
use core::cell::{Cell, UnsafeCell};
use core::ptr;

use dlmalloc::Dlmalloc;

use crate::small_blocks::{LargeAllocator, SizeClassed};

#[cfg(target_feature = "atomics")]
compile_error!("the guest heap assumes one thread: wasm32 without the atomics feature");

const WASM_PAGE: usize = 64 * 1024;

unsafe extern "C" {
    /// The first byte above the data and the stack, placed by wasm-ld.
    static __heap_base: u8;
}

/// The system side of dlmalloc: the first request is served from the
/// initial memory above `__heap_base` (grown only by what it lacks), later
/// ones from `memory.grow` as Rust's own wasm allocator does. Regions are
/// contiguous, so dlmalloc merges them into one segment.
struct InitialPagesThenGrow {
    initial_pages_claimed: Cell<bool>,
}

impl InitialPagesThenGrow {
    /// Grows memory by enough pages for `bytes`; the old end, or None.
    fn grow(bytes: usize) -> Option<usize> {
        let pages = bytes.div_ceil(WASM_PAGE);
        if pages == 0 {
            return Some(wasm32::memory_size(0) * WASM_PAGE);
        }
        match wasm32::memory_grow(0, pages) {
            usize::MAX => None,
            previous_pages => Some(previous_pages * WASM_PAGE),
        }
    }
}

// SAFETY: dlmalloc only asks for fresh regions (never remaps or frees
// them); each region is unused memory of this module, zeroed as wasm
// memory starts, and handed out once.
unsafe impl dlmalloc::Allocator for InitialPagesThenGrow {
    fn alloc(&self, size: usize) -> (*mut u8, usize, u32) {
        if !self.initial_pages_claimed.replace(true) {
            let start = (&raw const __heap_base as usize).next_multiple_of(16);
            let end = wasm32::memory_size(0) * WASM_PAGE;
            let available = end.saturating_sub(start);
            return match Self::grow(size.saturating_sub(available)) {
                Some(_) => (start as *mut u8, wasm32::memory_size(0) * WASM_PAGE - start, 0),
                None => (ptr::null_mut(), 0, 0),
            };
        }
        match Self::grow(size) {
            // The last page of a 4 GiB memory would end at address 0,
            // which no Rust pointer may reach: leave its last bytes out.
            Some(start) if start.wrapping_add(size.next_multiple_of(WASM_PAGE)) == 0 => {
                (start as *mut u8, size.next_multiple_of(WASM_PAGE) - 16, 0)
            }
            Some(start) => (start as *mut u8, size.next_multiple_of(WASM_PAGE), 0),
            None => (ptr::null_mut(), 0, 0),
        }
    }

    fn remap(&self, _ptr: *mut u8, _old: usize, _new: usize, _can_move: bool) -> *mut u8 {
        ptr::null_mut()
    }

    fn free_part(&self, _ptr: *mut u8, _old: usize, _new: usize) -> bool {
        false
    }

    fn free(&self, _ptr: *mut u8, _size: usize) -> bool {
        false
    }

    fn can_release_part(&self, _flags: u32) -> bool {
        false
    }

    fn allocates_zeros(&self) -> bool {
        true
    }

    fn page_size(&self) -> usize {
        WASM_PAGE
    }
}

// SAFETY: forwards to dlmalloc, whose contract is the same.
unsafe impl LargeAllocator for Dlmalloc<InitialPagesThenGrow> {
    unsafe fn malloc(&mut self, size: usize, align: usize) -> *mut u8 {
        unsafe { Dlmalloc::malloc(self, size, align) }
    }

    unsafe fn calloc(&mut self, size: usize, align: usize) -> *mut u8 {
        unsafe { Dlmalloc::calloc(self, size, align) }
    }

    unsafe fn free(&mut self, ptr: *mut u8, size: usize, align: usize) {
        unsafe { Dlmalloc::free(self, ptr, size, align) }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8 {
        unsafe { Dlmalloc::realloc(self, ptr, size, align, new_size) }
    }
}

/// Size classes for small requests, dlmalloc for the rest and for the
/// chunks small blocks are cut from.
type Heaps = SizeClassed<Dlmalloc<InitialPagesThenGrow>>;

struct GuestHeap(UnsafeCell<Heaps>);

// SAFETY: wasm32 without the atomics feature (checked above) runs one
// thread, so the allocator is never entered twice at once.
unsafe impl Sync for GuestHeap {}

#[global_allocator]
static HEAP: GuestHeap = GuestHeap(UnsafeCell::new(Heaps::new(Dlmalloc::new_with_allocator(InitialPagesThenGrow {
    initial_pages_claimed: Cell::new(false),
}))));

// SAFETY: each method forwards under the one-thread guarantee, with the
// caller's contract unchanged. Never inlined: with LTO, the allocator
// inlined into every allocation site made the code 18% larger.
unsafe impl GlobalAlloc for GuestHeap {
    #[inline(never)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe { (*self.0.get()).alloc(layout) }
    }

    #[inline(never)]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        unsafe { (*self.0.get()).alloc_zeroed(layout) }
    }

    #[inline(never)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { (*self.0.get()).dealloc(ptr, layout) }
    }

    #[inline(never)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        unsafe { (*self.0.get()).realloc(ptr, layout, new_size) }
    }
}
