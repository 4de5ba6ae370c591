//! The standard labels (`labelsForMemcached`), which are also every selector.

use std::collections::BTreeMap;

use crate::api::validation::is_label_value;

pub const NAME_KEY: &str = "app.kubernetes.io/name";
pub const INSTANCE_KEY: &str = "app.kubernetes.io/instance";
pub const MANAGED_BY_KEY: &str = "app.kubernetes.io/managed-by";
pub const VERSION_KEY: &str = "app.kubernetes.io/version";
pub const APP_NAME: &str = "memcached";
pub const MANAGED_BY: &str = "memcached-operator";

pub fn labels_for_memcached(name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (NAME_KEY.to_owned(), APP_NAME.to_owned()),
        (INSTANCE_KEY.to_owned(), name.to_owned()),
        (MANAGED_BY_KEY.to_owned(), MANAGED_BY.to_owned()),
    ])
}

/// The image tag, as the `app.kubernetes.io/version` label: none for an
/// untagged or digest-pinned image, or a tag that is no valid label value.
pub fn version_label(image: &str) -> Option<String> {
    if image.contains('@') {
        return None;
    }
    // The tag follows the last ':' after the last '/', so that a registry
    // port (`registry:5000/memcached`) is not mistaken for one.
    let last_segment = image.rsplit('/').next().unwrap_or(image);
    let (_, tag) = last_segment.rsplit_once(':')?;
    is_label_value(tag).then(|| tag.to_owned()).filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_labels_name_the_instance() {
        let labels = labels_for_memcached("my-cache");
        assert_eq!(labels.len(), 3);
        assert_eq!(labels[NAME_KEY], "memcached");
        assert_eq!(labels[INSTANCE_KEY], "my-cache");
        assert_eq!(labels[MANAGED_BY_KEY], "memcached-operator");
    }

    #[test]
    fn version_label_is_the_tag() {
        let cases = [
            ("memcached:1.6", Some("1.6")),
            ("memcached:1.6.38-alpine", Some("1.6.38-alpine")),
            ("registry.example.com:5000/cache/memcached:1.6", Some("1.6")),
            ("registry.example.com:5000/cache/memcached", None),
            ("memcached", None),
            ("memcached@sha256:0123abcd", None),
            ("memcached:1.6@sha256:0123abcd", None),
            ("memcached:", None),
            ("memcached:-bad-", None),
        ];
        for (image, want) in cases {
            assert_eq!(version_label(image).as_deref(), want, "{image}");
        }
    }
}
