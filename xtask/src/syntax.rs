//! Paths in Rust source as the compiler reads them, each with its line: every `use` (groups
//! flattened, renames and globs kept), every path in code, and every `a::b` path inside a macro
//! call's tokens. Shared by the layer check (`cargo xtask tidy`) and scheduler-core's purity test,
//! which includes this file with `#[path]`, so both read source the same way.

use proc_macro2::{Spacing, TokenStream, TokenTree};
use syn::visit::Visit;

/// A name a `use` item brings into scope: `name` stands for the path `target` (relative to the
/// module the `use` is in). A glob (`use a::b::*`) has no name of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Import {
    pub name: Option<String>,
    pub target: Vec<String>,
    pub line: usize,
}

/// A path as written (`crate::model::Gang`, `super::Claim`, `std::fs::read`) and its line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRef {
    pub segments: Vec<String>,
    pub line: usize,
}

/// A module declared inside another: `mod x;` (its items live in another file) or `mod x { … }`.
#[derive(Clone)]
pub struct Child {
    pub name: String,
    pub line: usize,
    /// The items of an inline module; `None` for `mod x;`.
    pub items: Option<Vec<syn::Item>>,
    /// A `#[path = "…"]` attribute, if any.
    pub path_attr: Option<String>,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child")
            .field("name", &self.name)
            .field("line", &self.line)
            .field("inline", &self.items.is_some())
            .field("path_attr", &self.path_attr)
            .finish()
    }
}

/// What one module's own items say (child modules are listed, not descended into).
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub imports: Vec<Import>,
    /// Every path: those of `use` items (their full targets; a glob's prefix) and those in code.
    pub paths: Vec<PathRef>,
    pub children: Vec<Child>,
}

/// Scans one module's items.
pub fn scan(items: &[syn::Item]) -> Scan {
    let mut v = Scanner::default();
    for item in items {
        v.visit_item(item);
    }
    v.out
}

/// Scans a whole file's text. A file that does not parse is an error naming the line.
pub fn scan_file(text: &str) -> Result<(Scan, Vec<syn::Item>), String> {
    let file = syn::parse_file(text).map_err(|e| format!("line {}: {e}", e.span().start().line))?;
    Ok((scan(&file.items), file.items))
}

#[derive(Default)]
struct Scanner {
    out: Scan,
}

impl Scanner {
    fn flatten(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.flatten(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let line = n.ident.span().start().line;
                if n.ident == "self" {
                    self.import(prefix.last().cloned(), prefix.clone(), line);
                } else {
                    let mut target = prefix.clone();
                    target.push(n.ident.to_string());
                    self.import(Some(n.ident.to_string()), target, line);
                }
            }
            syn::UseTree::Rename(r) => {
                let mut target = prefix.clone();
                if r.ident != "self" {
                    target.push(r.ident.to_string());
                }
                self.import(Some(r.rename.to_string()), target, r.ident.span().start().line);
            }
            syn::UseTree::Glob(g) => {
                self.import(None, prefix.clone(), g.star_token.span.start().line);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.flatten(t, prefix);
                }
            }
        }
    }

    fn import(&mut self, name: Option<String>, target: Vec<String>, line: usize) {
        if name.as_deref() == Some("_") {
            // `use Trait as _`: a path, but no name in scope.
            self.out.paths.push(PathRef { segments: target, line });
            return;
        }
        self.out.paths.push(PathRef { segments: target.clone(), line });
        self.out.imports.push(Import { name, target, line });
    }

    /// `a::b::c` sequences in a macro's tokens (the compiler sees them only after expansion).
    fn macro_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.macro_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(first) => {
                    let line = first.span().start().line;
                    let mut segments = vec![first.to_string()];
                    let mut j = i + 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(id)),
                    ) = (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':' {
                            segments.push(id.to_string());
                            j += 3;
                        } else {
                            break;
                        }
                    }
                    if segments.len() > 1 {
                        self.out.paths.push(PathRef { segments, line });
                    }
                    i = j;
                }
                TokenTree::Punct(_) | TokenTree::Literal(_) => i += 1,
            }
        }
    }
}

impl<'ast> Visit<'ast> for Scanner {
    fn visit_item_use(&mut self, i: &'ast syn::ItemUse) {
        self.flatten(&i.tree, &mut Vec::new());
    }

    fn visit_item_mod(&mut self, i: &'ast syn::ItemMod) {
        let path_attr = i.attrs.iter().find(|a| a.path().is_ident("path")).and_then(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        });
        self.out.children.push(Child {
            name: i.ident.to_string(),
            line: i.ident.span().start().line,
            items: i.content.as_ref().map(|(_, items)| items.to_vec()),
            path_attr,
        });
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(super)`, `pub(in a::b)` say who may see an item, not what it uses.
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if let Some(first) = p.segments.first() {
            self.out.paths.push(PathRef {
                segments: p.segments.iter().map(|s| s.ident.to_string()).collect(),
                line: first.ident.span().start().line,
            });
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.macro_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// Every function (free, in an `impl`, or a trait's default body) with its first and last line;
/// `#[cfg(test)]` modules left out.
pub fn functions(items: &[syn::Item]) -> Vec<(String, usize, usize)> {
    #[derive(Default)]
    struct Fns {
        out: Vec<(String, usize, usize)>,
        owner: Vec<String>,
    }
    impl<'ast> Visit<'ast> for Fns {
        fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
            self.push(&f.sig, f.block.brace_token.span.close().end().line);
            syn::visit::visit_item_fn(self, f);
        }
        fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
            self.push(&f.sig, f.block.brace_token.span.close().end().line);
            syn::visit::visit_impl_item_fn(self, f);
        }
        fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
            if let Some(b) = &f.default {
                self.push(&f.sig, b.brace_token.span.close().end().line);
            }
            syn::visit::visit_trait_item_fn(self, f);
        }
        fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
            let test_only = m.attrs.iter().any(|a| {
                a.path().is_ident("cfg")
                    && matches!(&a.meta, syn::Meta::List(l) if l.tokens.to_string() == "test")
            });
            if !test_only {
                syn::visit::visit_item_mod(self, m);
            }
        }
        fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
            let name = match &*i.self_ty {
                syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
                _ => None,
            };
            self.owner.push(name.unwrap_or_else(|| "_".into()));
            syn::visit::visit_item_impl(self, i);
            self.owner.pop();
        }
    }
    impl Fns {
        fn push(&mut self, sig: &syn::Signature, end: usize) {
            let name = match self.owner.last() {
                Some(o) => format!("{o}::{}", sig.ident),
                None => sig.ident.to_string(),
            };
            self.out.push((name, sig.fn_token.span.start().line, end));
        }
    }
    let mut v = Fns::default();
    for item in items {
        v.visit_item(item);
    }
    v.out
}
