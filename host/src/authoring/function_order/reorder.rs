//! A core module with some of its functions laid out first, in a given
//! order, and every reference to a function re-encoded to follow.

use std::collections::HashMap;

use wasm_encoder::reencode::{Error as ReencodeError, Reencode, utils};
use wasmparser::{FunctionBody, Name, Parser};

use super::{FunctionOrderError, Functions, functions, validate};

/// A module whose functions were laid out anew.
#[derive(Debug)]
pub struct Ordered {
    pub module: Vec<u8>,
    /// Defined functions moved to the front (every function of a listed name).
    pub moved: usize,
    /// Listed names no function has (the list is older than the build).
    pub unknown: usize,
}

/// `core` with the defined functions named in `first` laid out first, in
/// that order, and every other function after them in its order before.
/// Every reference to a function (calls, tables, exports, names) follows.
/// Names match [`without_crate_hashes`], so a list outlives a new compiler.
pub fn order_functions(core: &[u8], first: &[String]) -> Result<Ordered, FunctionOrderError> {
    // Every index in it is then in range: the re-encoding may index by them.
    validate(core).map_err(FunctionOrderError::InvalidInput)?;
    let Functions { imported, names, .. } = functions(core)?;
    let mut by_name: HashMap<String, Vec<u32>> = HashMap::new();
    for (position, name) in names.iter().enumerate() {
        if let Some(name) = name {
            by_name.entry(without_crate_hashes(name)).or_default().push(position as u32);
        }
    }
    let mut order = Vec::with_capacity(names.len());
    let mut placed = vec![false; names.len()];
    let mut unknown = 0;
    for name in first {
        match by_name.get(&without_crate_hashes(name)) {
            Some(positions) => {
                for &position in positions {
                    if !std::mem::replace(&mut placed[position as usize], true) {
                        order.push(position);
                    }
                }
            }
            None => unknown += 1,
        }
    }
    let moved = order.len();
    order.extend((0..names.len() as u32).filter(|&position| !placed[position as usize]));
    let mut new_position = vec![0u32; names.len()];
    for (new, &old) in order.iter().enumerate() {
        new_position[old as usize] = new as u32;
    }
    let mut reorder = Reorder { imported, order, new_position };
    let mut module = wasm_encoder::Module::new();
    reorder.parse_core_module(&mut module, Parser::new(0), core)?;
    let module = module.finish();
    validate(&module).map_err(FunctionOrderError::Invalid)?;
    Ok(Ordered { module, moved, unknown })
}

/// `name` without the crate hashes of Rust's v0 mangling (`Cs7DrMlInchCf_13serde_ignored`
/// → `C13serde_ignored`): cargo derives them from the compiler's version
/// among other things, so a new toolchain renames every function that way
/// and nothing else. Other names are returned as they are.
pub fn without_crate_hashes(name: &str) -> String {
    if !name.starts_with("_R") || !name.is_ascii() {
        return name.to_owned();
    }
    let bytes = name.as_bytes();
    let mut out = String::with_capacity(name.len());
    let mut i = 0;
    while i < bytes.len() {
        // A crate root: `C`, a disambiguator `s<base62>_`, then the name's length.
        if bytes[i] == b'C' && bytes.get(i + 1) == Some(&b's') {
            let digits = bytes[i + 2..].iter().take_while(|b| b.is_ascii_alphanumeric()).count();
            let end = i + 2 + digits;
            if bytes.get(end) == Some(&b'_') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
                out.push('C');
                i = end + 1;
                continue;
            }
        }
        out.push(bytes[i] as char);
        i += 1;
    }
    out
}

struct Reorder {
    imported: u32,
    /// Old position of the function at each new position.
    order: Vec<u32>,
    /// New position of the function at each old position.
    new_position: Vec<u32>,
}

impl Reorder {
    /// Name-map entries under the new function indices, in increasing order
    /// as name maps must list them.
    fn by_new_index<T>(
        &mut self,
        entries: Vec<(u32, T)>,
    ) -> Result<Vec<(u32, T)>, ReencodeError<std::convert::Infallible>> {
        let mut moved = entries
            .into_iter()
            .map(|(index, value)| Ok((self.function_index(index)?, value)))
            .collect::<Result<Vec<_>, ReencodeError<std::convert::Infallible>>>()?;
        moved.sort_by_key(|(index, _)| *index);
        Ok(moved)
    }

    /// Per-function names (locals, labels) under the new indices.
    fn indirect_names(
        &mut self,
        map: wasmparser::IndirectNameMap<'_>,
    ) -> Result<wasm_encoder::IndirectNameMap, ReencodeError<std::convert::Infallible>> {
        let mut entries = Vec::new();
        for naming in map {
            let naming = naming?;
            entries.push((naming.index, utils::name_map(naming.names, Ok)?));
        }
        let mut out = wasm_encoder::IndirectNameMap::new();
        for (index, names) in self.by_new_index(entries)? {
            out.append(index, &names);
        }
        Ok(out)
    }
}

impl Reencode for Reorder {
    type Error = std::convert::Infallible;

    fn function_index(&mut self, func: u32) -> Result<u32, ReencodeError<Self::Error>> {
        Ok(match func.checked_sub(self.imported) {
            Some(position) => self.imported + self.new_position[position as usize],
            None => func,
        })
    }

    fn parse_function_section(
        &mut self,
        functions: &mut wasm_encoder::FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        let types = section.into_iter().collect::<Result<Vec<u32>, _>>()?;
        for new in 0..self.order.len() {
            let ty = self.type_index(types[self.order[new] as usize])?;
            functions.function(ty);
        }
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        let bodies = section.into_iter().collect::<Result<Vec<FunctionBody<'_>>, _>>()?;
        for new in 0..self.order.len() {
            self.parse_function_body(code, bodies[self.order[new] as usize].clone())?;
        }
        Ok(())
    }

    // Name maps must list indices in increasing order: sorted after the move.
    fn parse_custom_name_subsection(
        &mut self,
        names: &mut wasm_encoder::NameSection,
        section: Name<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        match section {
            Name::Function(map) => {
                let entries =
                    map.into_iter().map(|naming| naming.map(|n| (n.index, n.name))).collect::<Result<_, _>>()?;
                let mut out = wasm_encoder::NameMap::new();
                for (index, name) in self.by_new_index(entries)? {
                    out.append(index, name);
                }
                names.functions(&out);
            }
            Name::Local(map) => names.locals(&self.indirect_names(map)?),
            Name::Label(map) => names.labels(&self.indirect_names(map)?),
            other => utils::parse_custom_name_subsection(self, names, other)?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{module, names, run};
    use super::*;

    #[test]
    fn listed_functions_move_to_the_front_in_the_listed_order_and_the_module_computes_the_same() {
        let before = module();
        assert_eq!(run(&before), 41);
        let first = ["sum".to_owned(), "twenty".to_owned(), "gone".to_owned()];
        let ordered = order_functions(&before, &first).expect("orders");
        assert_eq!(names(&ordered.module), ["sum", "twenty", "one", "unused"]);
        assert_eq!((ordered.moved, ordered.unknown), (2, 1));
        // Calls, the table and the export follow the functions they name.
        assert_eq!(run(&ordered.module), 41);
    }

    #[test]
    fn an_empty_order_keeps_every_function_where_it_was() {
        let ordered = order_functions(&module(), &[]).expect("orders");
        assert_eq!(names(&ordered.module), ["one", "twenty", "unused", "sum"]);
        assert_eq!(run(&ordered.module), 41);
    }

    #[test]
    fn names_match_across_compilers_without_their_crate_hashes() {
        assert_eq!(
            without_crate_hashes("_RINvXsb_Cs7DrMlInchCf_13serde_ignoredINtB6_11TrackedSeedNtCs9lBdkLa2Hdh_4core"),
            "_RINvXsb_C13serde_ignoredINtB6_11TrackedSeedNtC4core"
        );
        // Not a v0 name, or no crate root in it: as it is.
        assert_eq!(without_crate_hashes("cabi_realloc"), "cabi_realloc");
        assert_eq!(without_crate_hashes("_RNvXs_NtB2_3fooCs"), "_RNvXs_NtB2_3fooCs");
    }
}
