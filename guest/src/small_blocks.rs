//! Small allocations by size class: a freed block waits on its class's list
//! and is handed out again as it is, with no splitting or merging.
//!
//! Why: a reconcile makes thousands of small allocations (strings, maps,
//! the nodes of k8s-openapi's objects) and frees most of them within the
//! call. dlmalloc's bins, splitting and coalescing were a sixth of the
//! module's time in a `desired` call; taking a block off a list is a few
//! instructions. Classes are 16 bytes apart up to 128 and four to each
//! doubling above, so a block is at most a quarter larger than asked for.
//! Larger or more strictly aligned requests go to a general allocator
//! (dlmalloc in the component, `heap.rs`), which also supplies the chunks
//! small blocks are cut from.

use core::alloc::Layout;
use core::ptr;

/// Every block is aligned to, and a multiple of, this many bytes.
pub const GRANULE: usize = 16;

/// The largest request served here; larger ones go to the large allocator.
pub const LARGEST: usize = 8192;

/// How many classes cover 1..=LARGEST bytes.
pub const CLASSES: usize = class_of(LARGEST) + 1;

/// The bytes of each chunk taken from the large allocator to cut blocks from.
pub const CHUNK: usize = 64 * 1024;

/// The class of a request of `size` bytes (0..=LARGEST).
#[inline(always)]
pub const fn class_of(size: usize) -> usize {
    if size <= 128 {
        return size.saturating_sub(1) / GRANULE;
    }
    let n = size - 1;
    let log = (usize::BITS - 1 - n.leading_zeros()) as usize; // 7 or more
    let quarter = (n >> (log - 2)) & 3;
    8 + (log - 7) * 4 + quarter
}

/// The bytes of a block of `class`: the largest request of that class.
#[inline(always)]
pub const fn class_size(class: usize) -> usize {
    if class < 8 {
        return (class + 1) * GRANULE;
    }
    let log = (class - 8) / 4 + 7;
    let quarter = (class - 8) % 4;
    (5 + quarter) << (log - 2)
}

/// The free lists and the chunk blocks are being cut from.
pub struct SmallBlocks {
    /// Each class's freed blocks, linked through their first word.
    free: [*mut u8; CLASSES],
    /// The uncut rest of the current chunk.
    next: usize,
    end: usize,
}

impl SmallBlocks {
    pub const fn new() -> Self {
        SmallBlocks { free: [ptr::null_mut(); CLASSES], next: 0, end: 0 }
    }

    /// A block of `class`: a freed one, else one cut from the current
    /// chunk; None when the chunk has no room left (see `add_chunk`).
    ///
    /// # Safety
    /// Every block on the lists was handed out by this value and given back
    /// with `give_back`, and the chunks added are memory nothing else uses.
    #[inline(always)]
    pub unsafe fn take(&mut self, class: usize) -> Option<*mut u8> {
        let head = self.free[class];
        if !head.is_null() {
            // SAFETY: a listed block is ours and holds the next one's address.
            self.free[class] = unsafe { head.cast::<*mut u8>().read() };
            return Some(head);
        }
        let size = class_size(class);
        if self.end - self.next < size {
            return None;
        }
        let block = self.next;
        self.next += size;
        Some(block as *mut u8)
    }

    /// Puts a block of `class` back on its list.
    ///
    /// # Safety
    /// `block` came from `take(class)` and is not used after this.
    #[inline(always)]
    pub unsafe fn give_back(&mut self, block: *mut u8, class: usize) {
        // SAFETY: the block is at least GRANULE bytes, aligned, and ours.
        unsafe { block.cast::<*mut u8>().write(self.free[class]) };
        self.free[class] = block;
    }

    /// Cuts later blocks from `len` bytes at `start` (GRANULE-aligned). The
    /// previous chunk's uncut tail, smaller than the block that did not fit,
    /// stays unused.
    pub fn add_chunk(&mut self, start: *mut u8, len: usize) {
        self.next = start as usize;
        self.end = start as usize + len;
    }
}

/// The allocator behind the size classes: large and strictly aligned
/// requests, and the chunks small blocks are cut from.
///
/// # Safety
/// Each method keeps the contract of the `GlobalAlloc` method of its name.
pub unsafe trait LargeAllocator {
    unsafe fn malloc(&mut self, size: usize, align: usize) -> *mut u8;
    unsafe fn calloc(&mut self, size: usize, align: usize) -> *mut u8;
    unsafe fn free(&mut self, ptr: *mut u8, size: usize, align: usize);
    unsafe fn realloc(&mut self, ptr: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8;
}

/// Small blocks by size class in front of a large allocator, with
/// `GlobalAlloc`'s methods and contract (for one thread).
pub struct SizeClassed<L> {
    large: L,
    small: SmallBlocks,
}

/// The class of a request small blocks serve, or None for the large
/// allocator's.
#[inline(always)]
fn small_class(size: usize, align: usize) -> Option<usize> {
    (size <= LARGEST && align <= GRANULE).then(|| class_of(size))
}

impl<L: LargeAllocator> SizeClassed<L> {
    pub const fn new(large: L) -> Self {
        SizeClassed { large, small: SmallBlocks::new() }
    }

    /// # Safety
    /// As `GlobalAlloc::alloc`.
    #[inline(always)]
    pub unsafe fn alloc(&mut self, layout: Layout) -> *mut u8 {
        match small_class(layout.size(), layout.align()) {
            Some(class) => unsafe { self.small_block(class) },
            None => unsafe { self.large.malloc(layout.size(), layout.align()) },
        }
    }

    /// # Safety
    /// As `GlobalAlloc::alloc_zeroed`.
    #[inline(always)]
    pub unsafe fn alloc_zeroed(&mut self, layout: Layout) -> *mut u8 {
        let Some(class) = small_class(layout.size(), layout.align()) else {
            return unsafe { self.large.calloc(layout.size(), layout.align()) };
        };
        // A small block may have been used before: clear it.
        let block = unsafe { self.small_block(class) };
        if !block.is_null() {
            unsafe { ptr::write_bytes(block, 0, layout.size()) };
        }
        block
    }

    #[inline(always)]
    unsafe fn small_block(&mut self, class: usize) -> *mut u8 {
        match unsafe { self.small.take(class) } {
            Some(block) => block,
            None => unsafe { self.small_block_from_new_chunk(class) },
        }
    }

    #[cold]
    #[inline(never)]
    unsafe fn small_block_from_new_chunk(&mut self, class: usize) -> *mut u8 {
        let chunk = unsafe { self.large.malloc(CHUNK, GRANULE) };
        if chunk.is_null() {
            return chunk;
        }
        self.small.add_chunk(chunk, CHUNK);
        unsafe { self.small.take(class) }.unwrap_or(ptr::null_mut())
    }

    /// # Safety
    /// As `GlobalAlloc::dealloc`.
    #[inline(always)]
    pub unsafe fn dealloc(&mut self, ptr: *mut u8, layout: Layout) {
        match small_class(layout.size(), layout.align()) {
            Some(class) => unsafe { self.small.give_back(ptr, class) },
            None => unsafe { self.large.free(ptr, layout.size(), layout.align()) },
        }
    }

    /// # Safety
    /// As `GlobalAlloc::realloc`.
    #[inline(always)]
    pub unsafe fn realloc(&mut self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let align = layout.align();
        match (small_class(layout.size(), align), small_class(new_size, align)) {
            // A block already holds anything up to its class's size.
            (Some(old), Some(new)) if old == new => ptr,
            (None, None) => unsafe { self.large.realloc(ptr, layout.size(), align, new_size) },
            _ => {
                // SAFETY: the caller promises new_size, rounded up to align,
                // does not overflow isize.
                let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, align) };
                let moved = unsafe { self.alloc(new_layout) };
                if !moved.is_null() {
                    unsafe {
                        ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                }
                moved
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_gets_the_smallest_class_that_holds_it() {
        for size in 1..=LARGEST {
            let class = class_of(size);
            assert!(class < CLASSES, "{size}");
            assert!(class_size(class) >= size, "{size} in class {class} of {}", class_size(class));
            if class > 0 {
                assert!(class_size(class - 1) < size, "{size} fits class {}", class - 1);
            }
        }
        assert_eq!(class_size(CLASSES - 1), LARGEST);
    }

    #[test]
    fn blocks_are_aligned_and_at_most_a_quarter_larger_than_asked() {
        for class in 0..CLASSES {
            assert!(class_size(class).is_multiple_of(GRANULE));
        }
        for size in 129..=LARGEST {
            assert!(class_size(class_of(size)) * 4 <= size * 5 + 4 * GRANULE, "{size}");
        }
    }

    #[test]
    fn a_freed_block_is_handed_out_again_before_the_chunk_is_cut() {
        let mut chunk = vec![0u128; 64]; // 1 KiB, 16-byte aligned
        let mut blocks = SmallBlocks::new();
        blocks.add_chunk(chunk.as_mut_ptr().cast(), 1024);
        let class = class_of(100);
        // SAFETY: the chunk outlives `blocks` and nothing else uses it.
        unsafe {
            let first = blocks.take(class).expect("room");
            let second = blocks.take(class).expect("room");
            assert_eq!(second as usize - first as usize, class_size(class));
            blocks.give_back(first, class);
            assert_eq!(blocks.take(class), Some(first));
            assert_ne!(blocks.take(class), Some(first));
        }
    }

    #[test]
    fn a_full_chunk_answers_none_until_another_is_added() {
        let mut chunk = vec![0u128; 8]; // 128 bytes
        let mut blocks = SmallBlocks::new();
        // SAFETY: as above.
        unsafe {
            assert_eq!(blocks.take(0), None);
            blocks.add_chunk(chunk.as_mut_ptr().cast(), 128);
            assert!(blocks.take(class_of(64)).is_some());
            assert!(blocks.take(class_of(64)).is_some());
            assert_eq!(blocks.take(class_of(16)), None);
            let mut more = vec![0u128; 8];
            blocks.add_chunk(more.as_mut_ptr().cast(), 128);
            assert!(blocks.take(class_of(16)).is_some());
        }
    }

    /// The process's allocator behind the classes, counting what reaches it.
    #[derive(Default)]
    struct Counted {
        calls: usize,
    }

    // SAFETY: forwards to the system allocator with the same contract.
    unsafe impl LargeAllocator for Counted {
        unsafe fn malloc(&mut self, size: usize, align: usize) -> *mut u8 {
            self.calls += 1;
            unsafe { std::alloc::alloc(Layout::from_size_align(size, align).expect("valid")) }
        }
        unsafe fn calloc(&mut self, size: usize, align: usize) -> *mut u8 {
            self.calls += 1;
            unsafe { std::alloc::alloc_zeroed(Layout::from_size_align(size, align).expect("valid")) }
        }
        unsafe fn free(&mut self, ptr: *mut u8, size: usize, align: usize) {
            self.calls += 1;
            unsafe { std::alloc::dealloc(ptr, Layout::from_size_align(size, align).expect("valid")) }
        }
        unsafe fn realloc(&mut self, ptr: *mut u8, size: usize, align: usize, new_size: usize) -> *mut u8 {
            self.calls += 1;
            unsafe { std::alloc::realloc(ptr, Layout::from_size_align(size, align).expect("valid"), new_size) }
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).expect("valid")
    }

    #[test]
    fn small_requests_share_one_chunk_and_large_or_aligned_ones_go_behind() {
        let mut heap = SizeClassed::new(Counted::default());
        // SAFETY: every block is freed with the layout it was made with.
        unsafe {
            let small: Vec<_> = (1..=100).map(|size| heap.alloc(layout(size * 8, 8))).collect();
            assert_eq!(heap.large.calls, 1, "one chunk");
            assert!(small.iter().all(|block| !block.is_null() && (*block as usize).is_multiple_of(GRANULE)));
            let large = heap.alloc(layout(LARGEST + 1, 8));
            let aligned = heap.alloc(layout(64, 64));
            assert_eq!(heap.large.calls, 3);
            assert!((aligned as usize).is_multiple_of(64));
            heap.dealloc(large, layout(LARGEST + 1, 8));
            heap.dealloc(aligned, layout(64, 64));
            for (size, block) in (1..=100).zip(small) {
                heap.dealloc(block, layout(size * 8, 8));
            }
            assert_eq!(heap.large.calls, 5, "small blocks stay in their classes");
        }
    }

    #[test]
    fn realloc_keeps_the_bytes_across_classes_and_into_the_large_allocator() {
        let mut heap = SizeClassed::new(Counted::default());
        // SAFETY: as above; every size is non-zero and the layouts match.
        unsafe {
            let mut block = heap.alloc(layout(5, 1));
            block.copy_from_nonoverlapping(b"hello".as_ptr(), 5);
            let mut size = 5;
            for new_size in [9, 16, 17, 300, LARGEST, LARGEST + 1, 3 * LARGEST, 100, 3] {
                let before = block;
                block = heap.realloc(block, layout(size, 1), new_size);
                if class_of(size) == class_of(new_size) && new_size <= LARGEST {
                    assert_eq!(block, before, "{size} -> {new_size} stays in place");
                }
                let kept = size.min(new_size).min(5);
                assert_eq!(std::slice::from_raw_parts(block, kept), &b"hello"[..kept], "{size} -> {new_size}");
                size = new_size;
            }
            heap.dealloc(block, layout(size, 1));
        }
    }

    #[test]
    fn a_zeroed_block_is_cleared_even_when_it_was_used_before() {
        let mut heap = SizeClassed::new(Counted::default());
        // SAFETY: as above.
        unsafe {
            let block = heap.alloc(layout(48, 8));
            block.write_bytes(0xAB, 48);
            heap.dealloc(block, layout(48, 8));
            let zeroed = heap.alloc_zeroed(layout(40, 8));
            assert_eq!(zeroed, block, "the freed block is reused");
            assert!(std::slice::from_raw_parts(zeroed, 40).iter().all(|byte| *byte == 0));
            heap.dealloc(zeroed, layout(40, 8));
        }
    }
}
