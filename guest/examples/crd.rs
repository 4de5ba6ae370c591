//! Prints the Memcached CRD generated from the API types; `make manifests`
//! writes it to deploy/crd/, which the module embeds in its manifest.

fn main() {
    print!("{}", memcached_logic::api::crd_yaml());
}
