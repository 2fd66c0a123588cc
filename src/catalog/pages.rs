//! What was made of the list pages an upstream answered, kept by the page's bytes.
//!
//! An upstream answers the same `tools/list` page again and again, byte for byte, and
//! reading every tool's schema on every list call costs far more than the rest of the
//! call: 200 tools are tens of kilobytes of JSON. So what a page gave is kept with the
//! page, and a page equal to one seen before is compared, not read again. A page that
//! differs in one byte is read in full.

use std::sync::Arc;

use parking_lot::Mutex;

/// One upstream's page of a list whose names carry the upstream's prefix (tools,
/// prompts), as a merged list carries it.
#[derive(Debug, Default)]
pub(crate) struct PrefixedPage {
    /// Its entries, names prefixed, as JSON text.
    pub entries: Vec<String>,
    /// Its `nextCursor`.
    pub next_cursor: Option<String>,
}

/// The pages of an upstream's prefixed lists.
#[derive(Debug, Default)]
pub(crate) struct PrefixedLists {
    /// `tools/list` pages.
    pub tools: PageMemo<PrefixedPage>,
    /// `prompts/list` pages.
    pub prompts: PageMemo<PrefixedPage>,
}

/// Most pages remembered per list of an upstream (as many as seawall reads of a list).
pub(crate) const MAX_PAGES: usize = 16;

/// The last pages of one list of one upstream, each with what was made of it.
pub(crate) struct PageMemo<T> {
    pages: Mutex<Vec<(Arc<str>, Arc<T>)>>,
}

impl<T> Default for PageMemo<T> {
    fn default() -> PageMemo<T> {
        PageMemo { pages: Mutex::new(Vec::new()) }
    }
}

impl<T> PageMemo<T> {
    /// What was made of `page` when it was seen before.
    pub(crate) fn get(&self, page: &str) -> Option<Arc<T>> {
        let pages = self.pages.lock();
        pages.iter().find(|(seen, _)| **seen == *page).map(|(_, made)| Arc::clone(made))
    }

    /// Remembers what was made of `page`, forgetting the oldest page past [`MAX_PAGES`].
    pub(crate) fn insert(&self, page: &str, made: Arc<T>) {
        let mut pages = self.pages.lock();
        if pages.iter().any(|(seen, _)| **seen == *page) {
            return;
        }
        if pages.len() >= MAX_PAGES {
            pages.remove(0);
        }
        pages.push((Arc::from(page), made));
    }

    /// Keeps only the pages for which `keep` holds of what was made of them.
    pub(crate) fn retain(&self, mut keep: impl FnMut(&T) -> bool) {
        self.pages.lock().retain(|(_, made)| keep(made));
    }
}

impl<T> std::fmt::Debug for PageMemo<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageMemo").field("pages", &self.pages.lock().len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_found_by_its_bytes_and_the_oldest_goes_first() {
        let memo = PageMemo::default();
        memo.insert("{\"tools\":[]}", Arc::new(1));
        assert_eq!(memo.get("{\"tools\":[]}").as_deref(), Some(&1));
        assert!(memo.get("{\"tools\": []}").is_none(), "one byte differs");
        for n in 0..MAX_PAGES {
            memo.insert(&format!("page {n}"), Arc::new(n + 10));
        }
        assert!(memo.get("{\"tools\":[]}").is_none(), "the oldest page was forgotten");
        assert_eq!(memo.get("page 0").as_deref(), Some(&10));
    }
}
