//! Where a core module's functions sit in its code, and so in the code
//! wasmtime compiles from it (functions keep their order, by index).
//!
//! Why it matters: the operator maps a module's compiled code from its
//! `.cwasm` file, and the kernel maps 64 KiB around every page a call
//! faults in. A reconcile may run a few hundred of a Rust module's
//! thousands of functions, spread over the whole code, so after a few
//! hundred parents almost all of the code is resident. Laid out first and
//! together, the functions a reconcile runs fault in a fraction of it.
//!
//! Two steps, both on the core module before `componentize` wraps it:
//! [`instrument_entries`] makes a copy that records, per function, when it
//! first ran (a profile run reads that out), and [`order_functions`] moves
//! the functions so named to the front, in the order given.

use std::collections::HashMap;

use wasm_encoder::reencode::{Error as ReencodeError, Reencode, utils};
use wasm_encoder::{ConstExpr, ExportKind, GlobalType, Instruction, ValType};
use wasmparser::{FunctionBody, Name, Parser, Payload, TypeRef};

/// The export under which [`instrument_entries`] publishes the global of
/// each defined function, by its position among the defined functions.
pub const ENTRY_EXPORT_PREFIX: &str = "function-order:first-entry-";

#[derive(Debug, thiserror::Error)]
pub enum FunctionOrderError {
    #[error("the core module is not valid WebAssembly: {0}")]
    InvalidInput(wasmparser::BinaryReaderError),
    #[error("the core module does not parse: {0}")]
    Parse(#[from] wasmparser::BinaryReaderError),
    #[error("re-encoding the core module: {0}")]
    Reencode(String),
    #[error("the core module has no global section to add the entry marks to")]
    NoGlobals,
    #[error("the re-encoded module does not validate: {0}")]
    Invalid(wasmparser::BinaryReaderError),
}

impl From<ReencodeError<std::convert::Infallible>> for FunctionOrderError {
    fn from(error: ReencodeError<std::convert::Infallible>) -> Self {
        FunctionOrderError::Reencode(error.to_string())
    }
}

/// What a core module's function index space holds.
struct Functions {
    /// Imported functions come first in the index space and never move.
    imported: u32,
    /// Imported globals, likewise, before the module's own.
    imported_globals: u32,
    /// The name-section name of each defined function, by position.
    names: Vec<Option<String>>,
}

fn functions(core: &[u8]) -> Result<Functions, FunctionOrderError> {
    let mut imported = 0;
    let mut imported_globals = 0;
    let mut defined = 0usize;
    let mut named = HashMap::new();
    for payload in Parser::new(0).parse_all(core) {
        match payload? {
            Payload::ImportSection(section) => {
                for import in section.into_imports() {
                    match import?.ty {
                        TypeRef::Func(_) => imported += 1,
                        TypeRef::Global(_) => imported_globals += 1,
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(section) => defined = section.count() as usize,
            Payload::CustomSection(section) => {
                if let wasmparser::KnownCustom::Name(reader) = section.as_known() {
                    for name in reader {
                        if let Name::Function(map) = name? {
                            for naming in map {
                                let naming = naming?;
                                named.insert(naming.index, naming.name.to_owned());
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let names = (0..defined as u32).map(|position| named.remove(&(imported + position))).collect();
    Ok(Functions { imported, imported_globals, names })
}

/// The name of each defined function (None: the name section has none), by
/// position among the defined functions: what [`ENTRY_EXPORT_PREFIX`]'s
/// numbers refer to.
pub fn defined_function_names(core: &[u8]) -> Result<Vec<Option<String>>, FunctionOrderError> {
    Ok(functions(core)?.names)
}

/// The names in a function-order file: one per line; blank lines and
/// lines starting with `#` are skipped.
pub fn function_list(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')).map(str::to_owned).collect()
}

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

/// A copy of `core` that records when each defined function first ran: a
/// mutable i32 global per function, exported as [`ENTRY_EXPORT_PREFIX`] and
/// its position, 0 until the function is entered, then the count of
/// functions first entered until then (1 for the first). For a profile run
/// only: the copy is slower, and its globals count across calls.
pub fn instrument_entries(core: &[u8]) -> Result<Vec<u8>, FunctionOrderError> {
    validate(core).map_err(FunctionOrderError::InvalidInput)?;
    let Functions { imported_globals, names, .. } = functions(core)?;
    let mut instrument = Instrument { imported_globals, defined: names.len() as u32, counter: None, next_body: 0 };
    let mut module = wasm_encoder::Module::new();
    instrument.parse_core_module(&mut module, Parser::new(0), core)?;
    if instrument.counter.is_none() {
        return Err(FunctionOrderError::NoGlobals);
    }
    let module = module.finish();
    validate(&module).map_err(FunctionOrderError::Invalid)?;
    Ok(module)
}

struct Instrument {
    imported_globals: u32,
    defined: u32,
    /// The index of the counter global (set by the global section); the
    /// marks follow it.
    counter: Option<u32>,
    next_body: u32,
}

impl Instrument {
    fn counter(&self) -> u32 {
        self.counter.unwrap_or(0)
    }
}

impl Reencode for Instrument {
    type Error = std::convert::Infallible;

    fn parse_global_section(
        &mut self,
        globals: &mut wasm_encoder::GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        // Imported globals come first in the index space; defined ones follow.
        let mut count = 0;
        for global in section {
            self.parse_global(globals, global?)?;
            count += 1;
        }
        self.counter = Some(self.imported_globals + count);
        let mark = GlobalType { val_type: ValType::I32, mutable: true, shared: false };
        for _ in 0..=self.defined {
            globals.global(mark, &ConstExpr::i32_const(0));
        }
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut wasm_encoder::ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        let counter = self.counter();
        for position in 0..self.defined {
            exports.export(&format!("{ENTRY_EXPORT_PREFIX}{position}"), ExportKind::Global, counter + 1 + position);
        }
        Ok(())
    }

    fn parse_function_body(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        body: FunctionBody<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        let counter = self.counter();
        let mark = counter + 1 + self.next_body;
        self.next_body += 1;
        let mut function = utils::new_function_with_parsed_locals(self, &body)?;
        // if mark == 0 { counter += 1; mark = counter }
        for instruction in [
            Instruction::GlobalGet(mark),
            Instruction::I32Eqz,
            Instruction::If(wasm_encoder::BlockType::Empty),
            Instruction::GlobalGet(counter),
            Instruction::I32Const(1),
            Instruction::I32Add,
            Instruction::GlobalSet(counter),
            Instruction::GlobalGet(counter),
            Instruction::GlobalSet(mark),
            Instruction::End,
        ] {
            function.instruction(&instruction);
        }
        let mut reader = body.get_operators_reader()?;
        while !reader.eof() {
            function.instruction(&self.parse_instruction(&mut reader)?);
        }
        code.function(&function);
        Ok(())
    }
}

fn validate(module: &[u8]) -> Result<(), wasmparser::BinaryReaderError> {
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all()).validate_all(module).map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use wasm_encoder::{
        CodeSection, ElementSection, Elements, ExportSection, Function, FunctionSection, GlobalSection, Module,
        NameMap, NameSection, RefType, TableSection, TableType, TypeSection,
    };
    use wasmtime::{Engine, Instance, Store};

    use super::*;

    /// `one` returns 1, `twenty` 20, `unused` 300; `sum` (exported as run)
    /// calls `one`, `twenty` through the table and `twenty` again: 41.
    fn module() -> Vec<u8> {
        let mut types = TypeSection::new();
        types.ty().function([], [ValType::I32]);
        let mut functions = FunctionSection::new();
        for _ in 0..4 {
            functions.function(0);
        }
        let mut tables = TableSection::new();
        tables.table(TableType {
            element_type: RefType::FUNCREF,
            minimum: 1,
            maximum: Some(1),
            table64: false,
            shared: false,
        });
        let mut globals = GlobalSection::new();
        globals.global(GlobalType { val_type: ValType::I32, mutable: true, shared: false }, &ConstExpr::i32_const(0));
        let mut exports = ExportSection::new();
        exports.export("run", ExportKind::Func, 3);
        let mut elements = ElementSection::new();
        elements.active(Some(0), &ConstExpr::i32_const(0), Elements::Functions(Cow::Borrowed(&[1])));
        let mut code = CodeSection::new();
        for value in [1, 20, 300] {
            let mut constant = Function::new([]);
            constant.instruction(&Instruction::I32Const(value)).instruction(&Instruction::End);
            code.function(&constant);
        }
        let mut sum = Function::new([]);
        sum.instruction(&Instruction::Call(0))
            .instruction(&Instruction::I32Const(0))
            .instruction(&Instruction::CallIndirect { type_index: 0, table_index: 0 })
            .instruction(&Instruction::I32Add)
            .instruction(&Instruction::Call(1))
            .instruction(&Instruction::I32Add)
            .instruction(&Instruction::End);
        code.function(&sum);
        let mut names = NameMap::new();
        for (index, name) in ["one", "twenty", "unused", "sum"].into_iter().enumerate() {
            names.append(index as u32, name);
        }
        let mut name_section = NameSection::new();
        name_section.functions(&names);
        let mut module = Module::new();
        module
            .section(&types)
            .section(&functions)
            .section(&tables)
            .section(&globals)
            .section(&exports)
            .section(&elements)
            .section(&code)
            .section(&name_section);
        module.finish()
    }

    fn run(module: &[u8]) -> i32 {
        let engine = Engine::default();
        let module = wasmtime::Module::new(&engine, module).expect("compiles");
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("instantiates");
        let run = instance.get_typed_func::<(), i32>(&mut store, "run").expect("exports run");
        run.call(&mut store, ()).expect("runs")
    }

    fn names(module: &[u8]) -> Vec<String> {
        defined_function_names(module).expect("parses").into_iter().map(|name| name.unwrap_or_default()).collect()
    }

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
    fn the_instrumented_copy_records_when_each_function_first_ran_and_leaves_the_rest_at_zero() {
        let instrumented = instrument_entries(&module()).expect("instruments");
        let engine = Engine::default();
        let module = wasmtime::Module::new(&engine, &instrumented).expect("compiles");
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).expect("instantiates");
        let run = instance.get_typed_func::<(), i32>(&mut store, "run").expect("exports run");
        assert_eq!(run.call(&mut store, ()).expect("runs"), 41, "the copy computes what the module does");
        let rank = |store: &mut Store<()>, position: u32| {
            let global = instance.get_global(&mut *store, &format!("{ENTRY_EXPORT_PREFIX}{position}")).expect("mark");
            global.get(&mut *store).unwrap_i32()
        };
        let ranks: Vec<i32> = (0..4).map(|position| rank(&mut store, position)).collect();
        // sum entered first, then one, then twenty (twice: ranked once).
        assert_eq!(ranks, [2, 3, 0, 1]);
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

    #[test]
    fn bytes_that_are_not_a_valid_module_are_refused_with_what_is_wrong() {
        let error = order_functions(b"not wasm", &[]).expect_err("refused");
        assert!(error.to_string().starts_with("the core module is not valid WebAssembly"), "{error}");
        // A call to a function that does not exist: refused, not a panic.
        let mut module = module();
        let call_one = [0x10, 0x00];
        let at = module.windows(2).rposition(|w| w == call_one).expect("sum calls one");
        module[at + 1] = 0x63;
        let error = order_functions(&module, &["sum".to_owned()]).expect_err("refused");
        assert!(matches!(error, FunctionOrderError::InvalidInput(_)), "{error}");
        assert!(instrument_entries(&module).is_err(), "the profile copy is refused too");
    }
}
