// esbuild's text loader: `import crd from "../crd.yaml"` is the file's text.
declare module "*.yaml" {
  const text: string;
  export default text;
}
